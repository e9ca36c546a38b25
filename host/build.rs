//! Builds the bundled engines for wasm32-wasip2 and places them in OUT_DIR for `include_bytes!`.

use ctxhost_build_support::{Guest, build_guests, workspace_root};

const BUNDLED: &[Guest] = &[
    Guest {
        package: "ctxhost-legacy",
        dir: "engines/legacy",
    },
    Guest {
        package: "ctxhost-checkpoint-manager",
        dir: "engines/checkpoint-manager",
    },
];

fn main() {
    let out_dir =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let built = build_guests(&workspace_root(), BUNDLED);
    for (guest, path) in BUNDLED.iter().zip(built) {
        let dest = out_dir.join(guest.artifact_name());
        std::fs::copy(&path, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", path.display(), dest.display()));
    }
}
