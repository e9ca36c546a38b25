//! An engine from the future: it exports `ctxhost:engine/engine@0.9.0`. The host must refuse
//! it with a message naming the version it has and the versions supported.
//!
//! Only the wasm build is the engine. A native build of the workspace (`cargo build
//! --release` at the root) also compiles this crate, and a native cdylib cannot carry the
//! component export names (`cabi_post_ctxhost:engine/engine@0.9.0#info`: the linker's version
//! script rejects them), so natively the crate is empty.

#[cfg(target_arch = "wasm32")]
mod engine {
    wit_bindgen::generate!({
        inline: "
            package ctxhost:engine@0.9.0;
            interface engine {
                info: func() -> string;
            }
            world future-engine {
                export engine;
            }
        ",
    });

    struct Future;

    impl exports::ctxhost::engine::engine::Guest for Future {
        fn info() -> String {
            "future".into()
        }
    }

    export!(Future);
}
