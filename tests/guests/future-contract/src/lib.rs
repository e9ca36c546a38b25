//! An engine from the future: it exports `ctxhost:engine/engine@0.2.0`. The host must refuse
//! it with a message naming the version it has and the versions supported.

wit_bindgen::generate!({
    inline: "
        package ctxhost:engine@0.2.0;
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
