//! The layering rules of ARCHITECTURE.md, checked on the source: inside every crate of the
//! workspace the modules import each other without a circle, and no library prints.
//!
//! A module is a file (`a/b.rs` or `a/b/mod.rs` is `a::b`); it imports another when its code (tests
//! and comments left out) names a path `crate::…` or `super::…` that resolves to it (the longest
//! module prefix of the path). A parent's `pub use child::…` re-exports are not imports in this
//! sense, as they name no `crate::` or `super::` path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `src` by module path (binaries under `src/bin` are crates of their own
/// and left out).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if module.first().is_some_and(|m| m == "bin") {
                continue;
            }
            if module
                .last()
                .is_some_and(|m| ["mod", "lib", "main"].contains(&m.as_str()))
            {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// `code` without comments and without a trailing `#[cfg(test)] mod tests`.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths a use tree names, each as segments after `prefix`: `a::{b, c::d}` → `a::b`,
/// `a::c::d`.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Module>) {
    let tree = tree.trim();
    if let Some(inner) = tree.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&inner[start..i], prefix, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&inner[start..], prefix, out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    if let Some((head, group)) = tree.split_once("::{") {
        let mut p = prefix.to_vec();
        p.extend(head.split("::").map(str::to_string));
        expand(&format!("{{{group}"), &p, out);
        return;
    }
    let mut p = prefix.to_vec();
    p.extend(
        tree.split("::")
            .map(|s| s.split(" as ").next().unwrap_or("").trim().to_string())
            .filter(|s| !s.is_empty() && s != "self" && s != "*"),
    );
    out.push(p);
}

/// The path (or use tree) that starts at `rest` (just after a `crate::` or `super::`):
/// identifiers, `::` and, at the start or after a `::`, one balanced `{…}` group.
fn path_at(rest: &str) -> &str {
    let bytes = rest.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c.is_alphanumeric() || c == '_' || c == ':' || c == '*' {
            i += 1;
        } else if c == '{' && (i == 0 || rest[..i].ends_with("::")) {
            let mut depth = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return &rest[..=i];
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            return rest;
        } else {
            break;
        }
    }
    rest[..i].trim_end_matches(':')
}

/// The modules `module`'s code imports.
fn imports(module: &Module, code: &str, all: &BTreeMap<Module, PathBuf>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("::") {
        let before = &code[..i];
        let word_start = before
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |p| p + 1);
        let head = &code[word_start..i];
        // Only the start of a path: `crate` or a run of `super`s.
        if word_start > 0 && code[..word_start].ends_with("::") {
            continue;
        }
        let supers = head.split("::").filter(|s| *s == "super").count();
        let base: Module = if head == "crate" {
            Vec::new()
        } else if supers > 0 && head.split("::").all(|s| s == "super") && !code[i + 2..].starts_with(':') {
            module[..module.len().saturating_sub(supers)].to_vec()
        } else {
            continue;
        };
        let mut paths = Vec::new();
        expand(path_at(&code[i + 2..]), &base, &mut paths);
        for path in paths {
            let target = (0..=path.len())
                .rev()
                .map(|k| path[..k].to_vec())
                .find(|p| all.contains_key(p));
            if let Some(target) = target.filter(|t| t != module) {
                out.insert(target);
            }
        }
    }
    out
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct State<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Module) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for w in &s.edges[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Every crate's `src` folder: `crates/*/src` and `xtask/src`.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let mut out = vec![("xtask".to_string(), root.join("xtask/src"))];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("src").is_dir() {
            out.push((dir.file_name().unwrap().to_string_lossy().into_owned(), dir.join("src")));
        }
    }
    out.sort();
    out
}

/// The import graph of the crate whose sources are `src`.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let all = modules(src);
    all.iter()
        .map(|(m, path)| {
            (
                m.clone(),
                imports(m, &code_of(&std::fs::read_to_string(path).unwrap()), &all),
            )
        })
        .collect()
}

#[test]
fn no_crate_has_a_module_import_circle() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        for circle in circles(&graph(&src)) {
            let names: Vec<String> = circle
                .iter()
                .map(|m| if m.is_empty() { "lib".into() } else { m.join("::") })
                .collect();
            found.push(format!("{name}: {}", names.join(" ↔ ")));
        }
    }
    assert!(found.is_empty(), "module import circles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_finds_a_circle_and_resolves_groups_and_super() {
    let dir = std::env::temp_dir().join(format!("dml-module-graph-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("report")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod report;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{b::Thing, report};\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct Thing;\n// use crate::a;\n").unwrap();
    std::fs::write(src.join("report/mod.rs"), "pub mod html;\npub mod query;\n").unwrap();
    std::fs::write(src.join("report/html.rs"), "use super::query::Ranking;\n").unwrap();
    std::fs::write(
        src.join("report/query.rs"),
        "pub struct Ranking;\nfn f() { super::html::page(); }\n",
    )
    .unwrap();
    let g = graph(&src);
    let m = |s: &str| s.split("::").map(str::to_string).collect::<Module>();
    assert_eq!(g[&m("a")], BTreeSet::from([m("b"), m("report")]));
    assert!(g[&m("b")].is_empty(), "a commented-out import is no import");
    let found = circles(&g);
    assert_eq!(found.len(), 1, "{found:?}");
    let mut circle = found[0].clone();
    circle.sort();
    assert_eq!(circle, vec![m("report::html"), m("report::query")]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Lines of library code that print to the terminal: only binaries (`main.rs`, `src/bin/`), build
/// scripts, benches and tests may.
#[test]
fn no_library_prints() {
    let mut found = Vec::new();
    for (name, src) in crate_sources() {
        // Binary crates (no lib.rs) print by design; so do xtask (its library half serves its
        // commands) and dml-testkit (test helpers report what they skipped).
        if !src.join("lib.rs").exists() || name == "xtask" || name == "dml-testkit" {
            continue;
        }
        for path in modules(&src).into_values() {
            let text = code_of(&std::fs::read_to_string(&path).unwrap());
            for (n, line) in text.lines().enumerate() {
                if ["println!", "eprintln!", "print!(", "eprint!(", "dbg!("]
                    .iter()
                    .any(|p| line.contains(p))
                {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "library code prints:\n{}", found.join("\n"));
}
