//! What a component imports, read from its binary: an import ctxhost does not provide is
//! refused before compiling, and a link error about one says how to remove it.

use std::path::Path;

use anyhow::anyhow;
use ctxhost::plugins::Manifest;

/// Refuses a component importing `wasi:http` before the runtime spends seconds compiling it
/// (a JavaScript engine takes ~25 s), with the fix. Anything unreadable is left to the runtime.
pub(super) fn refuse_known_unprovided_imports(dir: &Path) -> anyhow::Result<()> {
    let Ok(manifest) = Manifest::read(dir) else {
        return Ok(());
    };
    let Ok(bytes) = std::fs::read(manifest.component_path(dir)) else {
        return Ok(());
    };
    let imports = component_imports(&bytes).unwrap_or_default();
    match imports.iter().find(|name| name.starts_with("wasi:http/")) {
        Some(import) => Err(with_import_hint(anyhow!(
            "{}: cannot link the component: it imports `{import}`",
            manifest.component_path(dir).display()
        ))),
        None => Ok(()),
    }
}

/// The names a component imports at its top level, read from the binary without compiling it;
/// `None` where the binary is not a component this reader understands.
fn component_imports(bytes: &[u8]) -> Option<Vec<String>> {
    fn leb(input: &mut &[u8]) -> Option<u32> {
        let mut value: u64 = 0;
        for shift in (0..35).step_by(7) {
            let (&byte, rest) = input.split_first()?;
            *input = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return u32::try_from(value).ok();
            }
        }
        None
    }
    fn take<'a>(input: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        (input.len() >= n).then(|| {
            let (head, rest) = input.split_at(n);
            *input = rest;
            head
        })
    }
    // Magic, then version 0x0d and layer 1: a component, not a core module.
    let mut rest = bytes.strip_prefix(b"\0asm\x0d\x00\x01\x00")?;
    let mut names = Vec::new();
    while let Some((&id, tail)) = rest.split_first() {
        rest = tail;
        let size = leb(&mut rest)? as usize;
        let mut section = take(&mut rest, size)?;
        if id != 10 {
            continue;
        }
        for _ in 0..leb(&mut section)? {
            // importname': 0x00 (or 0x01 in older binaries), then the name as a string.
            if *take(&mut section, 1)?.first()? > 0x01 {
                return None;
            }
            let len = leb(&mut section)? as usize;
            names.push(String::from_utf8(take(&mut section, len)?.to_vec()).ok()?);
            // externdesc: a kind byte, then one index or bound (core modules: 0x11 and an index).
            match *take(&mut section, 1)?.first()? {
                0x00 => {
                    take(&mut section, 1)?;
                    leb(&mut section)?;
                }
                0x01 | 0x04 | 0x05 => {
                    leb(&mut section)?;
                }
                0x02 => {
                    take(&mut section, 1)?;
                    leb(&mut section)?;
                }
                0x03 => {
                    if *take(&mut section, 1)?.first()? == 0x00 {
                        leb(&mut section)?;
                    }
                }
                _ => return None,
            }
        }
    }
    Some(names)
}

/// Adds how to remove an import ctxhost does not provide, where the toolchain is known.
pub(super) fn with_import_hint(error: anyhow::Error) -> anyhow::Error {
    // The import is named by wasmtime, in the error's sources.
    let text = format!("{error:#}");
    let Some(import) = text
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|name| name.starts_with("wasi:") || (name.contains(':') && name.contains('/')))
        .filter(|_| text.contains("cannot link"))
    else {
        return error;
    };
    let fix = if import.starts_with("wasi:http") {
        "componentize-js adds it by default: build with `componentize-js … --disable http fetch-event` \
         (the JavaScript template's `npm run build` does)"
            .to_string()
    } else {
        format!(
            "ctxhost provides `ctxhost:engine/host` and the WASI basics (cli, clocks, random, \
             filesystem, io); remove what imports `{import}` from the engine"
        )
    };
    anyhow!("{text}\nfix: the component imports `{import}`, which ctxhost does not provide; {fix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_components_imports_are_read_without_compiling_it() {
        let imports = component_imports(ctxhost::plugins::LEGACY_WASM).unwrap();
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("ctxhost:engine/host@")),
            "{imports:?}"
        );
        assert!(imports.iter().all(|i| !i.starts_with("wasi:http")));
        assert_eq!(component_imports(b"\0asm\x01\0\0\0"), None, "a core module");
        let mut truncated = ctxhost::plugins::LEGACY_WASM.to_vec();
        truncated.truncate(40);
        assert_eq!(component_imports(&truncated), None);
    }

    #[test]
    fn the_hint_names_the_import_and_the_flag() {
        let error = with_import_hint(anyhow!(
            "x.wasm: cannot link the component: component imports instance `wasi:http/types@0.2.10`, but …"
        ));
        let text = error.to_string();
        assert!(
            text.contains("fix: the component imports `wasi:http/types@0.2.10`"),
            "{text}"
        );
        assert!(text.contains("--disable http fetch-event"), "{text}");
        let other = with_import_hint(anyhow!(
            "x.wasm: cannot link the component: component imports instance `acme:db/query`, but …"
        ))
        .to_string();
        assert!(
            other.contains("remove what imports `acme:db/query`"),
            "{other}"
        );
        let unrelated = with_import_hint(anyhow!("engine `x` failed")).to_string();
        assert_eq!(unrelated, "engine `x` failed");
    }
}
