//! The `Cargo.toml` lines the book gives a reader (the four-step chapter, "Your model, your
//! loop") name real crates at the paths it says, the burn line is the workspace's own, and
//! the build profile it advises is the workspace's.

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
    check_chapter("four-step.md", &["steptrace", "steptrace-burn"]);
    check_chapter("your-model.md", &["steptrace-burn"]);
}

/// The chapter's `[dependencies]` are `wanted` by path and burn, and its profile lines are the
/// workspace's.
fn check_chapter(file: &str, wanted: &[&str]) {
    let root = super::root();
    let chapter = std::fs::read_to_string(root.join("book/src").join(file)).unwrap();
    let block = toml_block(&chapter);
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut crates = Vec::new();
    for line in block.lines().filter(|l| l.contains("= {")) {
        let name = line.split('=').next().unwrap().trim();
        if let Some(path) = field(line, "path") {
            // The chapter's checkout is `../steptrace`: the rest is a path inside this one.
            let inside =
                path.strip_prefix("../steptrace/").unwrap_or_else(|| panic!("{line}: not under ../steptrace/"));
            let manifest = std::fs::read_to_string(Path::new(&root).join(inside).join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{line}: {inside}/Cargo.toml: {e}"));
            assert!(manifest.contains(&format!("name = \"{name}\"")), "{line}: {inside} is not the crate {name}");
            crates.push(name);
        } else if name == "burn" {
            let ours = workspace.lines().find(|l| l.starts_with("burn = ")).expect("the workspace's burn line");
            assert_eq!(line.trim(), ours.trim(), "the chapter's burn line differs from the workspace's");
        } else {
            panic!("{line}: neither a path dependency nor burn");
        }
    }
    assert_eq!(crates, wanted, "{file}:\n{block}");
    // Every profile section the chapter gives is the workspace's, with its level.
    let level = |text: &str, section: &str| -> Option<String> {
        let at = text.find(&format!("{section}\n"))? + section.len() + 1;
        text[at..].lines().next().map(|l| l.trim().to_owned())
    };
    let sections: Vec<&str> = block.lines().filter(|l| l.starts_with("[profile.")).collect();
    assert!(sections.contains(&"[profile.dev.package.\"*\"]"), "{file}: {block}");
    for section in sections {
        assert_eq!(level(block, section), level(&workspace, section), "{file}: {section} differs from the workspace's");
    }
}
