//! The `Cargo.toml` lines the four-step chapter gives a reader name real crates at the paths
//! it says, and the burn line is the workspace's own.

use std::path::Path;

/// The chapter's ```` ```toml ```` block.
fn toml_block(markdown: &str) -> &str {
    let start = markdown.find("```toml\n").expect("four-step.md has a ```toml block") + "```toml\n".len();
    let end = start + markdown[start..].find("```").expect("closed");
    &markdown[start..end]
}

/// `value` of `key = "value"` inside an inline table line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("{key} = \""))? + key.len() + 4;
    Some(&line[at..at + line[at..].find('"')?])
}

#[test]
fn the_four_step_cargo_lines_name_real_crates_and_the_workspace_burn() {
    let root = super::root();
    let chapter = std::fs::read_to_string(root.join("book/src/four-step.md")).unwrap();
    let block = toml_block(&chapter);
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut crates = 0;
    for line in block.lines().filter(|l| l.contains("= {")) {
        let name = line.split('=').next().unwrap().trim();
        if let Some(path) = field(line, "path") {
            // The chapter's checkout is `../steptrace`: the rest is a path inside this one.
            let inside = path.strip_prefix("../steptrace/").unwrap_or_else(|| panic!("{line}: not under ../steptrace/"));
            let manifest = std::fs::read_to_string(Path::new(&root).join(inside).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{line}: {inside}/Cargo.toml: {e}"));
            assert!(manifest.contains(&format!("name = \"{name}\"")), "{line}: {inside} is not the crate {name}");
            crates += 1;
        } else if name == "burn" {
            let ours = workspace.lines().find(|l| l.starts_with("burn = ")).expect("the workspace's burn line");
            assert_eq!(line.trim(), ours.trim(), "the chapter's burn line differs from the workspace's");
        } else {
            panic!("{line}: neither a path dependency nor burn");
        }
    }
    assert_eq!(crates, 4, "steptrace, steptrace-burn, steptrace-models, steptrace-datasets:\n{block}");
    assert!(block.contains("[profile.dev.package.\"*\"]") && block.contains("opt-level = 3"), "{block}");
}
