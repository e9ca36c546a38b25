//! Builds the example and test guests the integration tests load.

use ctxhost_build_support::{Guest, build_guests, workspace_root};

const GUESTS: &[Guest] = &[
    Guest {
        package: "sliding-window",
        dir: "examples/sliding-window",
    },
    Guest {
        package: "hostile-engine",
        dir: "tests/guests/hostile",
    },
    Guest {
        package: "contract-v0-1-engine",
        dir: "tests/guests/contract-v0-1",
    },
    Guest {
        package: "contract-v0-2-engine",
        dir: "tests/guests/contract-v0-2",
    },
    Guest {
        package: "contract-v0-3-engine",
        dir: "tests/guests/contract-v0-3",
    },
    Guest {
        package: "context-view-engine",
        dir: "tests/guests/context-view",
    },
    Guest {
        package: "future-contract-engine",
        dir: "tests/guests/future-contract",
    },
];

fn main() {
    let out_dir =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let built = build_guests(&workspace_root(), GUESTS);
    for (guest, path) in GUESTS.iter().zip(built) {
        let dest = out_dir.join(guest.artifact_name());
        std::fs::copy(&path, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", path.display(), dest.display()));
    }
}
