//! Running the command lines of the documentation as written, so that the README and the pages
//! under `docs/` cannot drift from the programs: every ```` ```sh ```` block of a page is read at
//! test time and run through `bash` in a scratch directory, with `cargo` defined as a shell
//! function that maps the invocations a test owns (e.g. `cargo run --release -p train --`) to the
//! binary under test and skips every other one for a reason the test states. A command that no
//! mapping or skip rule covers is a failure, as is a skip rule or a substitution that no longer
//! matches anything in that page. [`pages_with_sh_blocks`] lists the pages a test suite must
//! cover.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One `cargo …` invocation the test runs: `cargo <prefix> [--] ARGS` becomes `binary ARGS EXTRA`.
#[derive(Debug, Clone)]
pub struct Mapping {
    /// The words after `cargo` that select this mapping, e.g. `["run", "--release", "-p", "train"]`.
    pub prefix: Vec<String>,
    /// The binary that runs instead.
    pub binary: PathBuf,
    /// Arguments appended to the command's own (small sizes for a test, say).
    pub extra: Vec<String>,
    /// First arguments (subcommands) for which nothing is appended.
    pub no_extra_for: Vec<String>,
}

/// A `cargo …` invocation that is not run, and why.
#[derive(Debug, Clone, Copy)]
pub struct Skip {
    /// A bash `case` pattern matched against the whole command line (`cargo xtask fetch-weights*`).
    pub pattern: &'static str,
    /// Why it is not run here.
    pub reason: &'static str,
}

/// `cargo test …` in a page: the suite that runs the page's test itself; every page test skips
/// it.
pub const SKIP_CARGO_TEST: Skip = Skip {
    pattern: "cargo test*",
    reason: "the test suite itself, which this test is part of",
};

/// `cargo bench …` and the timing forms of `cargo xtask bench` in a page: timing loops rather
/// than examples of use (`--peers` also installs PyTorch with pip); every page test skips them.
/// `cargo xtask bench --list` is not matched and runs.
pub const SKIP_CARGO_BENCH: Skip = Skip {
    pattern: "cargo bench*|cargo xtask bench|cargo xtask bench --peers*|cargo xtask bench --only*|cargo xtask bench --device*|cargo xtask bench --repeats*",
    reason: "a benchmark: minutes of timing loops, not an example of use",
};

/// A textual change to a page's blocks before they run (smaller sizes, one seed of a loop).
#[derive(Debug, Clone, Copy)]
pub struct Substitution {
    /// The text replaced (every occurrence).
    pub from: &'static str,
    /// Its replacement.
    pub to: &'static str,
    /// Why.
    pub why: &'static str,
}

/// One command that ran.
#[derive(Debug, Clone)]
pub struct Ran {
    /// The command line as the page's block expanded it (`cargo run …`).
    pub line: String,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// What [`run_page`] did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every mapped command, in order.
    pub ran: Vec<Ran>,
    /// Every skipped command line with its reason.
    pub skipped: Vec<(String, String)>,
}

impl Report {
    /// The runs whose command line contains `needle`.
    pub fn runs_with<'a>(&'a self, needle: &'a str) -> impl Iterator<Item = &'a Ran> + 'a {
        self.ran.iter().filter(move |r| r.line.contains(needle))
    }
}

/// The ```` ```sh ```` blocks of a Markdown text, each as its text.
pub fn sh_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_start() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// A skip pattern as a bash `case` pattern: the alternatives (`|`) kept, `*` a wildcard, every
/// other character literal (spaces included).
fn case_pattern(pattern: &str) -> String {
    pattern
        .split('|')
        .map(|alt| {
            format!(
                "\"{}\"",
                alt.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('$', "\\$")
                    .replace('`', "\\`")
                    .replace('*', "\"*\"")
            )
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Quotes a word for bash.
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// One `#[test]` per page, named first, and `const PAGES`, the pages the file tests:
/// `page_tests! { run; readme: "README.md" => check_readme, … }` makes `fn readme()`, which calls
/// `check_readme(&run("README.md"))`. [`assert_pages_tested`] compares `PAGES` with the files.
#[macro_export]
macro_rules! page_tests {
    ($run:path; $($test:ident: $page:literal => $check:path),* $(,)?) => {
        /// Every page this file runs, each by the test of the same entry.
        const PAGES: &[&str] = &[$($page),*];
        $(
            #[test]
            fn $test() {
                let ran = $run($page);
                $check(&ran);
            }
        )*
    };
}

/// Asserts that the pages a test file runs (`tested`, its `PAGES`) are exactly the pages of
/// `on_disk` (sorted, as [`pages_with_sh_blocks`] lists them), which `what` describes; the message
/// says how to add a page.
pub fn assert_pages_tested(tested: &[&str], on_disk: &[String], what: &str) {
    let mut listed: Vec<&str> = tested.to_vec();
    listed.sort_unstable();
    assert_eq!(
        on_disk, listed,
        "the pages with {what} (left) and the pages this file tests (right) differ: give a new page an \
         entry in page_tests! and spec()"
    );
}

/// The Markdown pages whose commands the tests run, as paths relative to `root` with `/`:
/// `README.md` and every `docs/*.md`, each only if it has a ```` ```sh ```` block, sorted.
pub fn pages_with_sh_blocks(root: &Path) -> Vec<String> {
    let mut candidates = vec!["README.md".to_string()];
    let docs = root.join("docs");
    if let Ok(entries) = std::fs::read_dir(&docs) {
        for entry in entries {
            let name = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", docs.display()))
                .file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".md") {
                candidates.push(format!("docs/{name}"));
            }
        }
    }
    let mut pages: Vec<String> = candidates
        .into_iter()
        .filter(|page| std::fs::read_to_string(root.join(page)).is_ok_and(|text| !sh_blocks(&text).is_empty()))
        .collect();
    pages.sort();
    pages
}

/// Runs every ```` ```sh ```` block of the page `page` (after `substitutions`) in `cwd` through
/// bash and returns what ran. Panics, with the command and its output, when a mapped command
/// fails, when a `cargo` command matches neither a mapping nor a skip rule, or when a skip rule
/// or substitution matches nothing in this page (the page changed and its test must follow).
pub fn run_page(
    page: &Path,
    cwd: &Path,
    mappings: &[Mapping],
    skips: &[Skip],
    substitutions: &[Substitution],
) -> Report {
    let name = page.display();
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
    let mut script = sh_blocks(&text).join("\n");
    assert!(!script.is_empty(), "{name} has no ```sh block");
    for s in substitutions {
        assert!(
            script.contains(s.from),
            "the substitution {:?} → {:?} ({}) matches nothing in the sh blocks of {name} any more",
            s.from,
            s.to,
            s.why
        );
        script = script.replace(s.from, s.to);
    }
    let log = cwd.join(".page-log");
    let outputs = cwd.join(".page-out");
    std::fs::create_dir_all(&outputs).unwrap();
    let _ = std::fs::remove_file(&log);

    let mut prelude = String::from("set -eo pipefail\n");
    let _ = writeln!(
        prelude,
        "LOG={}\nOUT={}\nN=0",
        quote(&log.to_string_lossy()),
        quote(&outputs.to_string_lossy())
    );
    prelude.push_str("cargo() {\n  local line=\"cargo $*\"\n  case \"$line\" in\n");
    for (i, skip) in skips.iter().enumerate() {
        let _ = writeln!(
            prelude,
            "    {}) printf 'SKIP\\t{i}\\t%s\\n' \"$line\" >> \"$LOG\"; return 0;;",
            case_pattern(skip.pattern)
        );
    }
    prelude.push_str("  esac\n");
    for m in mappings {
        let k = m.prefix.len();
        let extra: Vec<String> = m.extra.iter().map(|w| quote(w)).collect();
        let _ = writeln!(
            prelude,
            "  if [ \"${{*:1:{k}}}\" = {prefix} ]; then\n    shift {k}; [ \"${{1:-}}\" = -- ] && shift\n    \
             local extra=({extra})\n    {none}\n    \
             N=$((N + 1)); printf 'RUN\\t%s\\t%s\\n' \"$N\" \"$line\" >> \"$LOG\"\n    \
             if ! {bin} \"$@\" \"${{extra[@]}}\" > \"$OUT/$N.out\" 2> \"$OUT/$N.err\"; then\n      \
             echo \"FAILED: $line\" >&2; cat \"$OUT/$N.out\" \"$OUT/$N.err\" >&2; exit 1\n    fi\n    return 0\n  fi",
            prefix = quote(&m.prefix.join(" ")),
            extra = extra.join(" "),
            none = if m.no_extra_for.is_empty() {
                String::new()
            } else {
                format!("case \"${{1:-}}\" in {}) extra=();; esac", m.no_extra_for.join("|"))
            },
            bin = quote(&m.binary.to_string_lossy()),
        );
    }
    prelude.push_str("  echo \"no mapping or skip rule for: $line\" >&2; exit 1\n}\n");
    let full = format!("{prelude}\n{script}");
    std::fs::write(cwd.join(".page.sh"), &full).unwrap();
    let output = Command::new("bash")
        .arg(cwd.join(".page.sh"))
        .current_dir(cwd)
        .output()
        .expect("run bash");
    assert!(
        output.status.success(),
        "a command of {name} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let mut report = Report::default();
    let mut used = vec![false; skips.len()];
    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
    for entry in log_text.lines() {
        let mut parts = entry.splitn(3, '\t');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("RUN"), Some(n), Some(line)) => {
                let read = |ext: &str| std::fs::read_to_string(outputs.join(format!("{n}.{ext}"))).unwrap_or_default();
                report.ran.push(Ran {
                    line: line.to_string(),
                    stdout: read("out"),
                    stderr: read("err"),
                });
            }
            (Some("SKIP"), Some(i), Some(line)) => {
                let i: usize = i.parse().unwrap();
                used[i] = true;
                report.skipped.push((line.to_string(), skips[i].reason.to_string()));
            }
            _ => panic!("unreadable log line {entry:?}"),
        }
    }
    for (skip, used) in skips.iter().zip(used) {
        assert!(
            used,
            "the skip rule {:?} ({}) matches no command of {name} any more",
            skip.pattern, skip.reason
        );
    }
    for (line, reason) in &report.skipped {
        eprintln!("skipped: {line}\n    because {reason}");
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_patterns_become_quoted_case_patterns() {
        assert_eq!(case_pattern("cargo xtask*"), r#""cargo xtask"*"""#);
        assert_eq!(case_pattern("*a=*|b c"), r#"""*"a="*""|"b c""#);
    }

    #[test]
    fn the_pages_are_the_readme_and_the_docs_with_sh_blocks() {
        let root = std::env::temp_dir().join(format!("dml-testkit-pages-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("docs/nested")).unwrap();
        let with = "text\n```sh\necho a\n```\n";
        let without = "text\n```rust\nfn x() {}\n```\n";
        std::fs::write(root.join("README.md"), with).unwrap();
        std::fs::write(root.join("docs/b.md"), with).unwrap();
        std::fs::write(root.join("docs/a.md"), with).unwrap();
        std::fs::write(root.join("docs/plain.md"), without).unwrap();
        std::fs::write(root.join("docs/notes.txt"), with).unwrap();
        std::fs::write(root.join("docs/nested/deep.md"), with).unwrap();
        assert_eq!(pages_with_sh_blocks(&root), ["README.md", "docs/a.md", "docs/b.md"]);
        std::fs::write(root.join("README.md"), without).unwrap();
        assert_eq!(pages_with_sh_blocks(&root), ["docs/a.md", "docs/b.md"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn sh_blocks_are_extracted_and_other_blocks_ignored() {
        let md = "text\n```sh\ncargo a \\\n  b\n```\n```rust\nfn x() {}\n```\n```sh\necho c\n```\n";
        assert_eq!(
            sh_blocks(md),
            vec!["cargo a \\\n  b\n".to_string(), "echo c\n".to_string()]
        );
    }
}
