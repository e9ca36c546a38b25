//! Bindings for contract `ctxhost:engine@0.1.0`, the newest version, whose types the rest of
//! the host uses directly. When 0.2 arrives, it gets its own module and this one converts its
//! types into 0.2's (the way Zed's extension host keeps `since_v0_x_y` modules).

wasmtime::component::bindgen!({
    path: "../wit",
    world: "context-engine",
    imports: { default: async | trappable },
    exports: { default: async },
    anyhow: true,
});

/// The contract version this module speaks.
pub const VERSION: &str = "0.1.0";
