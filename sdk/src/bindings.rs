//! The contract's generated bindings (wit-bindgen, from `wit/`).

wit_bindgen::generate!({
    path: "wit",
    world: "context-engine",
    pub_export_macro: true,
    default_bindings_module: "ctxhost_sdk::bindings",
    additional_derives: [PartialEq, Eq],
    // 0.4 includes 0.3's and 0.2's interfaces from its `deps/`: generate them here too.
    generate_all,
});
