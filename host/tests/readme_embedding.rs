//! README.md's "Embedding" block is host/examples/embedding.rs (between its README markers), so
//! the documented calls are the ones that build.

#[test]
fn the_readme_embedding_block_is_the_example() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("../README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("examples/embedding.rs")).unwrap();
    let section = &readme[readme.find("## Embedding\n").expect("an Embedding section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &section[start..start + section[start..].find("```\n").unwrap()];
    let begin = example.find("// README: begin\n").unwrap() + "// README: begin\n".len();
    let end = example.find("    // README: end").unwrap();
    let from_example: String = example[begin..end]
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l).to_string() + "\n")
        .collect();
    assert_eq!(block, from_example);
}
