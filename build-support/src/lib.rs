//! Builds guest engines of this workspace for `wasm32-wasip2` from a build script, so a plain
//! `cargo build` / `cargo test` on a fresh clone produces the components it embeds or loads.
//!
//! The guests are built by a nested cargo into their own target directory
//! (`target/wasm-guests`), which keeps the outer build's lock free and lets every build script
//! share one warm guest cache.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const TARGET: &str = "wasm32-wasip2";

/// A guest package of the workspace and the file its build produces.
pub struct Guest {
    /// Cargo package name, e.g. `ctxhost-legacy`.
    pub package: &'static str,
    /// The workspace-relative directory of its sources, watched for changes.
    pub dir: &'static str,
}

impl Guest {
    /// The `.wasm` file name cargo gives a cdylib of this package.
    pub fn artifact_name(&self) -> String {
        format!("{}.wasm", self.package.replace('-', "_"))
    }
}

/// Builds `guests` in release mode and returns the path of each component, in order.
///
/// Panics with an actionable message on failure: a build script has no better channel.
pub fn build_guests(workspace: &Path, guests: &[Guest]) -> Vec<PathBuf> {
    for dir in ["wit", "sdk/src", "sdk/Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(dir).display());
    }
    for guest in guests {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(guest.dir).display()
        );
    }
    let target_dir = workspace.join("target").join("wasm-guests");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for guest in guests {
        command.args(["-p", guest.package]);
    }
    // The outer build's settings are for the host target; they must not leak into the guests.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
        "CARGO_PKG_NAME",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        command.env_remove(var);
    }
    // Debug info would make the embedded components ~30x larger.
    command
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_PROFILE_RELEASE_STRIP", "true");
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the guest engines: {e}"));
    if !status.success() {
        panic!(
            "building the guest engines for {TARGET} failed (see the output above). \
             If the target is missing, run: rustup target add {TARGET}"
        );
    }
    let out = target_dir.join(TARGET).join("release");
    guests
        .iter()
        .map(|guest| {
            let path = out.join(guest.artifact_name());
            if !path.is_file() {
                panic!("the guest build did not produce {}", path.display());
            }
            path
        })
        .collect()
}

/// The workspace root, from a member crate's build script.
pub fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let mut dir = PathBuf::from(manifest);
    while !dir.join("wit").is_dir() {
        if !dir.pop() {
            panic!("cannot find the workspace root (a directory with wit/) above the crate");
        }
    }
    dir
}
