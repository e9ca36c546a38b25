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
    Guest {
        package: "ctxhost-lossless",
        dir: "engines/lossless",
    },
];

fn main() {
    let out_dir =
        std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // `lossless` links the transcript crate's extractive helpers and, with checkpoint-manager,
    // the shared heuristics: a change there changes them.
    for shared in ["transcript/src", "heuristics/src"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root().join(shared).display()
        );
    }
    let built = build_guests(&workspace_root(), BUNDLED);
    for (guest, path) in BUNDLED.iter().zip(built) {
        let dest = out_dir.join(guest.artifact_name());
        std::fs::copy(&path, &dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", path.display(), dest.display()));
    }
    embed_sdk_sources(&workspace_root(), &out_dir);
}

/// Lists the SDK crate, the WIT and the pins it builds with as `(repo path, include_str!)`
/// pairs, so `plugins new` can vendor them: a scaffold then builds without this repository.
fn embed_sdk_sources(root: &std::path::Path, out_dir: &std::path::Path) {
    fn walk(dir: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, files);
            } else {
                files.push(path);
            }
        }
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    let mut files = vec![
        root.join("Cargo.toml"),
        root.join("Cargo.lock"),
        root.join("sdk/Cargo.toml"),
    ];
    walk(&root.join("sdk/src"), &mut files);
    walk(&root.join("wit"), &mut files);
    let mut list = String::from("&[\n");
    for file in &files {
        let relative = file.strip_prefix(root).expect("under the root");
        let relative = relative.to_string_lossy().replace('\\', "/");
        list += &format!(
            "    ({relative:?}, include_str!({:?})),\n",
            file.display().to_string()
        );
    }
    list += "]\n";
    std::fs::write(out_dir.join("sdk_sources.rs"), list).expect("write sdk_sources.rs");
}
