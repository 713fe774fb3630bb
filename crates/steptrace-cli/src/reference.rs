//! `book/src/reference.md` checked against the code: its generated tables (commands and
//! flags from clap's definition, span names from `steptrace::format::names::SPANS`, manifest
//! fields from `steptrace::format::Manifest`) must equal what this module generates, and its
//! prose may name no flag that does not exist.
//!
//! Regenerate after a change: `REGENERATE_REFERENCE=1 cargo test -p steptrace-cli --bin
//! steptrace reference`.

use std::fmt::Write;
use std::path::PathBuf;

use clap::{Arg, ArgAction, Command, CommandFactory};
use steptrace::format::names::SPANS;
use steptrace::format::{Manifest, StartupInfo};

const REGENERATE: &str = "REGENERATE_REFERENCE=1 cargo test -p steptrace-cli --bin steptrace reference";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A table cell: one line, pipes escaped.
fn cell(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

fn value_of(arg: &Arg) -> String {
    let possible: Vec<String> =
        arg.get_possible_values().iter().filter(|v| !v.is_hide_set()).map(|v| v.get_name().to_owned()).collect();
    let takes_value = matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
    if !takes_value {
        return String::new();
    }
    if !possible.is_empty() {
        return format!("`{}`", possible.join("` \\| `"));
    }
    let names: Vec<String> = arg.get_value_names().unwrap_or_default().iter().map(|n| n.to_string()).collect();
    let name = if names.is_empty() { arg.get_id().as_str().to_uppercase() } else { names.join(" ") };
    format!("`{name}`")
}

fn arg_row(arg: &Arg) -> String {
    let name = match (arg.get_long(), arg.get_short()) {
        (Some(long), Some(short)) => format!("`--{long}`, `-{short}`"),
        (Some(long), None) => format!("`--{long}`"),
        (None, _) => {
            let id = arg
                .get_value_names()
                .and_then(|n| n.first().map(|n| n.to_string()))
                .unwrap_or_else(|| arg.get_id().as_str().to_uppercase());
            let many =
                matches!(arg.get_action(), ArgAction::Append) || arg.get_num_args().is_some_and(|n| n.max_values() > 1);
            format!("`{id}{}` (positional)", if many { "..." } else { "" })
        }
    };
    let defaults: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    let default = if defaults.is_empty() { String::new() } else { format!("`{}`", defaults.join(",")) };
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    format!("| {name} | {} | {} | {} |\n", value_of(arg), default, cell(&help))
}

fn commands_table(cli: &Command) -> String {
    let mut out = String::new();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
        let _ = write!(out, "### `steptrace {}`\n\n{}\n\n", sub.get_name(), cell(&about).replace("\\|", "|"));
        let args: Vec<&Arg> = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
            .collect();
        if args.is_empty() {
            out.push_str("No arguments.\n\n");
            continue;
        }
        out.push_str("| argument | value | default | meaning |\n|---|---|---|---|\n");
        for arg in args {
            out.push_str(&arg_row(arg));
        }
        out.push('\n');
    }
    out
}

fn spans_table() -> String {
    let mut out = String::from("| span | meaning |\n|---|---|\n");
    for span in SPANS {
        let _ = writeln!(out, "| `{}` | {} |", span.name, cell(span.meaning));
    }
    out
}

/// Intra-doc links made plain text: `` [`x`](Path) `` and `` [`x`] `` become `` `x` ``.
fn plain(doc: &str) -> String {
    let mut out = String::new();
    let mut rest = doc;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        out.push_str(&after[..close]);
        rest = &after[close + 1..];
        if rest.starts_with('(') {
            if let Some(end) = rest.find(')') {
                rest = &rest[end + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The fields of `pub struct NAME` in `source`: name, Rust type and doc comment.
fn struct_fields(source: &str, name: &str) -> Vec<(String, String, String)> {
    let start =
        source.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("pub struct {name} in manifest.rs"));
    let body = &source[start..];
    let body = &body[..body.find("\n}").expect("end of struct")];
    let mut fields = Vec::new();
    let mut doc = Vec::new();
    for line in body.lines().skip(1).map(str::trim) {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim().to_owned());
        } else if let Some(field) = line.strip_prefix("pub ") {
            let (field, ty) = field.split_once(':').expect("field: type");
            fields.push((field.trim().to_owned(), ty.trim().trim_end_matches(',').to_owned(), plain(&doc.join(" "))));
            doc.clear();
        } else if !line.starts_with("#[") && !line.is_empty() {
            doc.clear();
        }
    }
    fields.into_iter().filter(|(f, ..)| f != "extra").collect()
}

fn json_type(rust: &str) -> String {
    let inner = rust.strip_prefix("Option<").and_then(|t| t.strip_suffix('>')).unwrap_or(rust);
    match inner {
        "String" => "string".into(),
        "u64" => "integer".into(),
        "f64" => "number".into(),
        "bool" => "true or false".into(),
        "Vec<String>" => "list of strings".into(),
        "Vec<u64>" => "list of integers".into(),
        "StartupInfo" => "object (the next table)".into(),
        "u32" => "integer".into(),
        "Measured" => "a figure (below), or null".into(),
        "BTreeMap<String, Measured>" => "object: dtype to figure".into(),
        "BTreeMap<String, Published>" => "object: name to published figure".into(),
        "Figure<ColdStart>" => "object, or the reason it is absent".into(),
        other => format!("`{other}`"),
    }
}

fn manifest_tables() -> String {
    let source = std::fs::read_to_string(root().join("crates/steptrace/src/format/manifest.rs")).expect("manifest.rs");
    let mut out = String::new();
    for (name, prefix) in [("Manifest", ""), ("StartupInfo", "startup.")] {
        let fields = struct_fields(&source, name);
        assert!(fields.len() >= 4, "{name}: too few fields read from manifest.rs: {fields:?}");
        for (field, ..) in &fields {
            assert_is_serde_field(name, field);
        }
        out.push_str("| field | type | meaning |\n|---|---|---|\n");
        for (field, ty, doc) in fields {
            let _ = writeln!(out, "| `{prefix}{field}` | {} | {} |", json_type(&ty), cell(&doc));
        }
        out.push('\n');
    }
    out.trim_end().to_owned() + "\n"
}

/// The fields of a peaks file (`steptrace::format::peaks`): the file, one figure, one
/// published figure.
fn peaks_tables() -> String {
    let source = std::fs::read_to_string(root().join("crates/steptrace/src/format/peaks.rs")).expect("peaks.rs");
    let mut out = String::new();
    for (name, prefix) in [("Peaks", ""), ("Measured", "(figure)."), ("Published", "(published).")] {
        let fields = struct_fields(&source, name);
        assert!(fields.len() >= 2, "{name}: too few fields read from peaks.rs: {fields:?}");
        out.push_str("| field | type | meaning |\n|---|---|---|\n");
        for (field, ty, doc) in fields {
            let _ = writeln!(out, "| `{prefix}{field}` | {} | {} |", json_type(&ty), cell(&doc));
        }
        out.push('\n');
    }
    out.trim_end().to_owned() + "\n"
}

/// A field read from the source must be a key the manifest reads: a key it does not know
/// lands in `extra` instead.
fn assert_is_serde_field(name: &str, field: &str) {
    let value = serde_json::json!({ field: null });
    let extra = match name {
        "Manifest" => serde_json::from_value::<Manifest>(value).map(|m| m.extra),
        _ => serde_json::from_value::<StartupInfo>(value).map(|s| s.extra),
    };
    // A type error (a list given null) also proves the key is known.
    if let Ok(extra) = extra {
        assert!(!extra.contains_key(field), "{name}.{field} is not a serde key of {name} (renamed?)");
    }
}

/// Replaces the region between `<!-- generated: NAME -->` and `<!-- end generated -->`.
fn fill(text: &str, name: &str, content: &str) -> String {
    let open = format!("<!-- generated: {name} -->\n");
    let close = "<!-- end generated -->";
    let start = text.find(&open).unwrap_or_else(|| panic!("reference.md lacks `{}`", open.trim())) + open.len();
    let end =
        start + text[start..].find(close).unwrap_or_else(|| panic!("reference.md: `{}` is not closed", open.trim()));
    format!("{}\n{}\n{}", &text[..start], content.trim_end(), &text[end..])
}

/// Every long flag a subcommand has, plus clap's own.
fn all_flags(cli: &Command) -> Vec<String> {
    let mut flags = vec!["help".to_owned(), "version".to_owned()];
    for sub in cli.get_subcommands() {
        flags.extend(sub.get_arguments().filter_map(|a| a.get_long().map(str::to_owned)));
    }
    flags
}

#[test]
fn reference_md_matches_the_code() {
    let path = root().join("book/src/reference.md");
    let committed = std::fs::read_to_string(&path).expect("book/src/reference.md");
    let cli = crate::args::Cli::command();
    let mut generated = fill(&committed, "commands", &commands_table(&cli));
    generated = fill(&generated, "spans", &spans_table());
    generated = fill(&generated, "manifest", &manifest_tables());
    generated = fill(&generated, "peaks", &peaks_tables());
    if generated != committed {
        if std::env::var_os("REGENERATE_REFERENCE").is_some() {
            std::fs::write(&path, &generated).expect("write reference.md");
        } else {
            let line = committed.lines().zip(generated.lines()).position(|(a, b)| a != b).map_or(0, |n| n + 1);
            panic!(
                "book/src/reference.md's generated tables differ from the code (first at line {line}):\n- {}\n+ {}\nregenerate with: {REGENERATE}",
                committed.lines().nth(line.saturating_sub(1)).unwrap_or("(end)"),
                generated.lines().nth(line.saturating_sub(1)).unwrap_or("(end)"),
            );
        }
    }
    // The prose may name only flags that exist (cargo's own, on its command lines, apart).
    let flags = all_flags(&cli);
    let mut unknown = Vec::new();
    for line in generated.lines().filter(|l| !l.contains("cargo ")) {
        for (at, _) in line.match_indices("--") {
            let name: String = line[at + 2..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if name.starts_with(|c: char| c.is_ascii_lowercase()) && !flags.contains(&name) {
                unknown.push(name);
            }
        }
    }
    assert!(unknown.is_empty(), "reference.md names flags that no command has: {unknown:?}");
}

#[test]
fn the_generator_sees_every_command_flag_span_and_field() {
    let cli = crate::args::Cli::command();
    let table = commands_table(&cli);
    for needle in [
        "### `steptrace train`",
        "### `steptrace backends`",
        "| `--schedule` |",
        "| `--backend` | `auto` \\| `cuda`",
        "`TRACES...` (positional)",
    ] {
        assert!(table.contains(needle), "{needle} missing from:\n{table}");
    }
    assert!(spans_table().contains("| `data.load` |"));
    let manifest = manifest_tables();
    for needle in ["| `backend` | string |", "| `notes` | list of strings |", "| `startup.first_step_ms` | number |"] {
        assert!(manifest.contains(needle), "{needle} missing from:\n{manifest}");
    }
    assert!(!manifest.contains("`extra`"));
    let peaks = peaks_tables();
    for needle in [
        "| `read` | a figure (below), or null |",
        "| `flops` | object: dtype to figure |",
        "| `(figure).spread` | number |",
    ] {
        assert!(peaks.contains(needle), "{needle} missing from:\n{peaks}");
    }
    assert_eq!(plain("see [`extra`](Manifest::extra) and [`Figure`]"), "see `extra` and `Figure`");
}
