//! The one-way layout of the sources (docs/architecture.md), read from their text with std only:
//! no module cycle, between files nor between the folders of any one level (a parent `mod.rs`
//! counts as a member of its folder's level); no non-test function over 80 lines; few files at
//! the crate's root. Run: `cargo test -p cargo-parprof --test layout`.
//!
//! A file depends on a module when it declares it (`mod x;`) or names it in a path that starts
//! with `crate`, `super`, `self` or one of its own child modules, in a `use` (groups, `self`,
//! aliases and globs included) or inline (`crate::units::ms(..)`). A path reaches the deepest
//! module it names: `crate::analysis::Analysis` reaches analysis/mod.rs even when mod.rs only
//! re-exports `Analysis`, so importing through a parent's re-export is a dependency on the parent.
//! Items under `#[cfg(test)]` or `#[test]` are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The longest function allowed, from its `fn` line to its closing brace, both counted.
const MOST_FUNCTION_LINES: usize = 80;

/// A crate whose sources are checked.
struct CrateLayout {
    /// Its source folder, relative to the workspace's root.
    src: &'static str,
    /// The most `.rs` files its source folder may hold directly, if limited.
    most_root_files: Option<usize>,
    /// Breaches known and not yet mended, each as words that the first line of its problem
    /// holds: they do not fail the test, but one that is gone must leave this list, so that
    /// the list only shrinks.
    still_open: &'static [&'static [&'static str]],
}

const CARGO_PARPROF: CrateLayout = CrateLayout {
    src: "cargo-parprof/src",
    most_root_files: Some(5),
    still_open: &[],
};

/// parprof-rt: the recording core (recorder.rs) below start-up (runtime.rs), leaves below both.
const PARPROF_RT: CrateLayout = CrateLayout {
    src: "parprof-rt/src",
    most_root_files: None,
    still_open: &[],
};

#[test]
fn cargo_parprof_layout_is_one_way() {
    assert_layout(&CARGO_PARPROF);
}

/// parprof-macros: the entry points in lib.rs, one file per attribute.
const PARPROF_MACROS: CrateLayout = CrateLayout {
    src: "parprof-macros/src",
    most_root_files: None,
    still_open: &[],
};

#[test]
fn parprof_rt_layout_is_one_way() {
    assert_layout(&PARPROF_RT);
}

#[test]
fn parprof_macros_layout_is_one_way() {
    assert_layout(&PARPROF_MACROS);
}

fn assert_layout(layout: &CrateLayout) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds cargo-parprof")
        .join(layout.src);
    let problems = layout_problems(&src, layout.most_root_files);
    let is_open = |problem: &str, words: &[&str]| {
        let first_line = problem.lines().next().unwrap_or_default();
        words.iter().all(|word| first_line.contains(word))
    };
    let new: Vec<&String> = problems
        .iter()
        .filter(|problem| {
            !layout
                .still_open
                .iter()
                .any(|words| is_open(problem, words))
        })
        .collect();
    let mended: Vec<String> = layout
        .still_open
        .iter()
        .filter(|words| !problems.iter().any(|problem| is_open(problem, words)))
        .map(|words| words.join(" … "))
        .collect();
    assert!(
        new.is_empty(),
        "{}: the layout is not one-way:\n\n{}",
        layout.src,
        new.iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    assert!(
        mended.is_empty(),
        "{}: mended, so remove from `still_open`: {}",
        layout.src,
        mended.join("; ")
    );
}

/// Every breach of the layout rules in the crate whose sources are in `src`, worded for a reader.
fn layout_problems(src: &Path, most_root_files: Option<usize>) -> Vec<String> {
    let tree = ModuleTree::read(src);
    let mut problems = Vec::new();
    problems.extend(tree.cycles());
    problems.extend(tree.long_functions());
    if let Some(most) = most_root_files {
        problems.extend(root_file_count_problem(src, most));
    }
    problems
}

fn root_file_count_problem(src: &Path, most: usize) -> Option<String> {
    let mut root_files: Vec<String> = std::fs::read_dir(src)
        .unwrap_or_else(|e| panic!("reading {}: {e}", src.display()))
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|path| path.is_file() && path.extension().is_some_and(|ext| ext == "rs"))
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    root_files.sort();
    (root_files.len() > most).then(|| {
        format!(
            "{} files at the root of the sources, at most {most} allowed: {}",
            root_files.len(),
            root_files.join(", ")
        )
    })
}

// ---------------------------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Spanned {
    token: Token,
    line: usize,
}

/// The tokens of Rust source that the layout reads: identifiers (keywords and numbers
/// included), `::` and single punctuation. Comments, string and character literals and
/// lifetimes are dropped, so that a path in a doc comment or a message is not a dependency.
fn tokenize(text: &str) -> Vec<Spanned> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            i = block_comment_end(&chars, i);
        } else if let Some(end) = string_literal_end(&chars, i) {
            i = end;
        } else if c == '\'' {
            i = quote_end(&chars, i);
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let ident: String = chars[start..i].iter().collect();
            tokens.push(Spanned {
                token: Token::Ident(ident),
                line,
            });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            tokens.push(Spanned {
                token: Token::PathSep,
                line,
            });
            i += 2;
        } else {
            if !c.is_whitespace() {
                tokens.push(Spanned {
                    token: Token::Punct(c),
                    line,
                });
            }
            i += 1;
        }
        line += chars[start..i].iter().filter(|&&c| c == '\n').count();
    }
    tokens
}

/// Where the block comment opening at `start` ends; block comments nest.
fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0;
    let mut i = start;
    while i < chars.len() {
        if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
            depth += 1;
            i += 2;
        } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    i
}

/// Where the string literal opening at `start` ends (`"…"`, `b"…"`, `c"…"`, `r#"…"#`, `br"…"`),
/// or `None` when no string literal opens there.
fn string_literal_end(chars: &[char], start: usize) -> Option<usize> {
    let preceded_by_ident =
        start > 0 && (chars[start - 1].is_alphanumeric() || chars[start - 1] == '_');
    if preceded_by_ident {
        return None;
    }
    let mut i = start;
    if matches!(chars[i], 'b' | 'c') {
        i += 1;
    }
    if chars.get(i) == Some(&'r') {
        i += 1;
        let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
        i += hashes;
        if chars.get(i) != Some(&'"') {
            return None;
        }
        i += 1;
        while i < chars.len() {
            if chars[i] == '"'
                && chars[i + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == '#')
                    .count()
                    == hashes
            {
                return Some(i + 1 + hashes);
            }
            i += 1;
        }
        return Some(i);
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    Some(i)
}

/// Where the character literal or lifetime opening with the quote at `start` ends.
fn quote_end(chars: &[char], start: usize) -> usize {
    let next = chars.get(start + 1);
    if next == Some(&'\\') {
        // An escaped character: '\n', '\'', '\u{1F600}'.
        let mut i = start + 3;
        while i < chars.len() && chars[i] != '\'' {
            i += 1;
        }
        return i + 1;
    }
    if chars.get(start + 2) == Some(&'\'') {
        return start + 3;
    }
    // A lifetime or label: 'a, 'static.
    let mut i = start + 1;
    while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
        i += 1;
    }
    i
}

/// The tokens without the items under `#[cfg(test)]` or `#[test]`.
fn without_test_items(tokens: Vec<Spanned>) -> Vec<Spanned> {
    let mut kept = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if let Some(after_attribute) = test_attribute_end(&tokens, i) {
            i = item_end(&tokens, after_attribute);
        } else {
            kept.push(tokens[i].clone());
            i += 1;
        }
    }
    kept
}

/// Where the attribute at `i` ends if it is `#[cfg(test)]` or `#[test]`.
fn test_attribute_end(tokens: &[Spanned], i: usize) -> Option<usize> {
    let words: Vec<Token> = tokens[i..]
        .iter()
        .take(7)
        .map(|t| t.token.clone())
        .collect();
    let ident = |s: &str| Token::Ident(s.to_string());
    let test = [
        Token::Punct('#'),
        Token::Punct('['),
        ident("test"),
        Token::Punct(']'),
    ];
    let cfg_test = [
        Token::Punct('#'),
        Token::Punct('['),
        ident("cfg"),
        Token::Punct('('),
        ident("test"),
        Token::Punct(')'),
        Token::Punct(']'),
    ];
    if words.starts_with(&cfg_test) {
        Some(i + cfg_test.len())
    } else if words.starts_with(&test) {
        Some(i + test.len())
    } else {
        None
    }
}

/// Where the item starting at `start` ends: after its first `;` or braced block at depth 0.
fn item_end(tokens: &[Spanned], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < tokens.len() {
        match tokens[i].token {
            Token::Punct('(' | '[' | '{') => depth += 1,
            Token::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            Token::Punct(';') if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    i
}

fn is_ident(token: Option<&Spanned>, word: &str) -> bool {
    matches!(token, Some(Spanned { token: Token::Ident(s), .. }) if s == word)
}

fn ident_of(token: Option<&Spanned>) -> Option<&str> {
    match token {
        Some(Spanned {
            token: Token::Ident(s),
            ..
        }) => Some(s),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Module tree and dependencies

/// One source file: a module of the crate.
struct SourceFile {
    /// The module's path from the crate root (empty for the root).
    module: Vec<String>,
    /// The file, relative to the source folder.
    path: PathBuf,
    tokens: Vec<Spanned>,
}

/// A module path named in a file, with the line that names it.
#[derive(Debug, Clone, PartialEq)]
struct NamedPath {
    segments: Vec<String>,
    line: usize,
}

/// Why one file depends on another.
#[derive(Debug, Clone)]
struct Evidence {
    line: usize,
    path: String,
}

struct ModuleTree {
    files: Vec<SourceFile>,
    by_module: BTreeMap<Vec<String>, usize>,
    /// Edges between files (indexes into `files`), each with the first place that makes it.
    edges: BTreeMap<(usize, usize), Evidence>,
}

impl ModuleTree {
    fn read(src: &Path) -> ModuleTree {
        let mut files = Vec::new();
        let root = ["lib.rs", "main.rs"]
            .iter()
            .map(PathBuf::from)
            .find(|name| src.join(name).is_file())
            .unwrap_or_else(|| panic!("no lib.rs nor main.rs in {}", src.display()));
        read_module(src, Vec::new(), root, &mut files);
        let by_module = files
            .iter()
            .enumerate()
            .map(|(index, file)| (file.module.clone(), index))
            .collect();
        let mut tree = ModuleTree {
            files,
            by_module,
            edges: BTreeMap::new(),
        };
        tree.edges = tree.dependencies();
        tree
    }

    fn children(&self, module: &[String]) -> BTreeSet<&str> {
        self.files
            .iter()
            .filter(|file| file.module.len() == module.len() + 1 && file.module.starts_with(module))
            .map(|file| file.module.last().unwrap().as_str())
            .collect()
    }

    fn dependencies(&self) -> BTreeMap<(usize, usize), Evidence> {
        let mut edges = BTreeMap::new();
        for (from, file) in self.files.iter().enumerate() {
            for named in declared_modules(&file.tokens)
                .into_iter()
                .chain(used_paths(&file.tokens))
                .chain(inline_paths(&file.tokens, &self.children(&file.module)))
            {
                let Some(to) = self.resolve(&file.module, &named.segments) else {
                    continue;
                };
                if to != from {
                    edges.entry((from, to)).or_insert(Evidence {
                        line: named.line,
                        path: named.segments.join("::"),
                    });
                }
            }
        }
        edges
    }

    /// The file of the deepest module that `segments`, named in `module`, reaches; `None` for a
    /// path outside the crate or to an item of the naming module itself.
    fn resolve(&self, module: &[String], segments: &[String]) -> Option<usize> {
        let mut target: Vec<String> = match segments.first()?.as_str() {
            "crate" => Vec::new(),
            "self" | "super" => module.to_vec(),
            first if self.children(module).contains(first) => module.to_vec(),
            _ => return None,
        };
        let skip = usize::from(segments[0] == "crate");
        for segment in &segments[skip..] {
            match segment.as_str() {
                "self" => {}
                "super" => {
                    target.pop().expect("`super` above the crate root");
                }
                name if self.children(&target).contains(name) => target.push(name.to_string()),
                _ => break,
            }
        }
        self.by_module.get(&target).copied()
    }

    fn name(&self, file: usize) -> String {
        self.files[file].path.display().to_string()
    }
}

/// Reads the module in `path` (relative to `src`) and, depth first, the modules it declares.
fn read_module(src: &Path, module: Vec<String>, path: PathBuf, files: &mut Vec<SourceFile>) {
    let text = std::fs::read_to_string(src.join(&path))
        .unwrap_or_else(|e| panic!("reading {}: {e}", src.join(&path).display()));
    let tokens = without_test_items(tokenize(&text));
    if let Some(inline) = inline_module(&tokens) {
        panic!(
            "{}: the non-test module `{inline}` is written inline; the layout check reads one \
             module per file",
            path.display()
        );
    }
    let owns_folder = matches!(
        path.file_name().and_then(|name| name.to_str()),
        Some("lib.rs" | "main.rs" | "mod.rs")
    );
    let folder = if owns_folder {
        path.parent().unwrap().to_path_buf()
    } else {
        path.with_extension("")
    };
    let declared = declared_modules(&tokens);
    files.push(SourceFile {
        module: module.clone(),
        path,
        tokens,
    });
    for child in declared {
        let name = &child.segments[1];
        let flat = folder.join(format!("{name}.rs"));
        let child_path = if src.join(&flat).is_file() {
            flat
        } else {
            folder.join(name).join("mod.rs")
        };
        let mut child_module = module.clone();
        child_module.push(name.clone());
        read_module(src, child_module, child_path, files);
    }
}

/// The modules a file declares (`mod x;`), each as the path `self::x`.
fn declared_modules(tokens: &[Spanned]) -> Vec<NamedPath> {
    tokens
        .windows(3)
        .filter(|w| is_ident(w.first(), "mod") && matches!(w[2].token, Token::Punct(';')))
        .filter_map(|w| {
            Some(NamedPath {
                segments: vec!["self".to_string(), ident_of(w.get(1))?.to_string()],
                line: w[0].line,
            })
        })
        .collect()
}

/// The name of a module written inline (`mod x { … }`), if any.
fn inline_module(tokens: &[Spanned]) -> Option<String> {
    tokens
        .windows(3)
        .find(|w| is_ident(w.first(), "mod") && matches!(w[2].token, Token::Punct('{')))
        .and_then(|w| ident_of(w.get(1)).map(str::to_string))
}

/// The paths of every `use` declaration, its groups expanded:
/// `use crate::{a::{b, c as d}, e::*};` names `crate::a::b`, `crate::a::c`, `crate::e`.
fn used_paths(tokens: &[Spanned]) -> Vec<NamedPath> {
    let mut paths = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if is_ident(Some(token), "use") {
            use_tree(tokens, i + 1, &[], &mut paths);
        }
    }
    paths
}

/// Reads the use tree at `start` under `prefix` into `paths`; returns where it ends.
fn use_tree(
    tokens: &[Spanned],
    start: usize,
    prefix: &[String],
    paths: &mut Vec<NamedPath>,
) -> usize {
    let mut segments = prefix.to_vec();
    let mut i = start;
    if matches!(tokens.get(i).map(|t| &t.token), Some(Token::PathSep)) {
        // `use ::name`: another crate.
        segments.push("::".to_string());
        i += 1;
    }
    loop {
        let Some(spanned) = tokens.get(i) else {
            return i;
        };
        match &spanned.token {
            Token::Punct('{') => {
                i += 1;
                while !matches!(
                    tokens.get(i).map(|t| &t.token),
                    Some(Token::Punct('}')) | None
                ) {
                    i = use_tree(tokens, i, &segments, paths);
                    if matches!(tokens.get(i).map(|t| &t.token), Some(Token::Punct(','))) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            Token::Punct('*') => {
                paths.push(NamedPath {
                    segments,
                    line: spanned.line,
                });
                return i + 1;
            }
            Token::Ident(name) => {
                segments.push(name.clone());
                i += 1;
                if matches!(tokens.get(i).map(|t| &t.token), Some(Token::PathSep)) {
                    i += 1;
                    continue;
                }
                if is_ident(tokens.get(i), "as") {
                    i += 2;
                }
                paths.push(NamedPath {
                    segments,
                    line: spanned.line,
                });
                return i;
            }
            _ => return i,
        }
    }
}

/// The paths written inline that start with `crate`, `super`, `self` or one of `children`
/// (`crate::units::ms(…)`, `super::super::model::Analysis`), outside `use` declarations.
fn inline_paths(tokens: &[Spanned], children: &BTreeSet<&str>) -> Vec<NamedPath> {
    let mut paths = Vec::new();
    let mut in_use = false;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i].token {
            Token::Ident(word) if word == "use" => in_use = true,
            Token::Punct(';') => in_use = false,
            Token::Ident(first)
                if !in_use
                    && (matches!(first.as_str(), "crate" | "super" | "self")
                        || children.contains(first.as_str()))
                    && matches!(tokens.get(i + 1).map(|t| &t.token), Some(Token::PathSep))
                    && !matches!(
                        i.checked_sub(1).map(|p| &tokens[p].token),
                        Some(Token::PathSep)
                    ) =>
            {
                let line = tokens[i].line;
                let mut segments = vec![first.clone()];
                i += 1;
                while matches!(tokens.get(i).map(|t| &t.token), Some(Token::PathSep)) {
                    match ident_of(tokens.get(i + 1)) {
                        Some(next) => segments.push(next.to_string()),
                        None => break,
                    }
                    i += 2;
                }
                paths.push(NamedPath { segments, line });
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    paths
}

// ---------------------------------------------------------------------------------------------
// Cycles

impl ModuleTree {
    /// A problem for every cycle between files, and for every cycle between the members of one
    /// folder (its own mod.rs and each child module with everything under it).
    fn cycles(&self) -> Vec<String> {
        let all: Vec<usize> = (0..self.files.len()).collect();
        let file_edges: BTreeMap<(usize, usize), Evidence> = self.edges.clone();
        let mut problems: Vec<String> = strongly_connected(all.len(), &file_edges)
            .into_iter()
            .map(|component| {
                self.describe_cycle("files", &component, &file_edges, &|f| self.name(f))
            })
            .collect();
        for folder in self.files.iter().map(|file| &file.module) {
            problems.extend(self.folder_cycles(folder));
        }
        problems
    }

    /// The cycles among the members of `folder`'s level that are not already cycles of files.
    fn folder_cycles(&self, folder: &[String]) -> Vec<String> {
        let children: Vec<&str> = self.children(folder).into_iter().collect();
        if children.is_empty() {
            return Vec::new();
        }
        // Member 0 is the folder's own file, member k + 1 its child k with its subtree.
        let member = |file: usize| -> Option<usize> {
            let module = &self.files[file].module;
            if !module.starts_with(folder) {
                return None;
            }
            match module.get(folder.len()) {
                None => Some(0),
                Some(child) => children.iter().position(|c| c == child).map(|k| k + 1),
            }
        };
        let mut edges = BTreeMap::new();
        for (&(from, to), evidence) in &self.edges {
            if let (Some(a), Some(b)) = (member(from), member(to))
                && a != b
            {
                edges.entry((a, b)).or_insert_with(|| Evidence {
                    line: evidence.line,
                    path: format!(
                        "{} line {}: {}",
                        self.name(from),
                        evidence.line,
                        evidence.path
                    ),
                });
            }
        }
        let folder_file = self.by_module[folder];
        let member_name = |m: usize| match m {
            0 => self.name(folder_file),
            k => format!("{} (with what is under it)", children[k - 1]),
        };
        let level = format!("the members of {}'s level", self.name(folder_file));
        strongly_connected(children.len() + 1, &edges)
            .into_iter()
            .filter(|component| !self.is_file_cycle(component, &member))
            .map(|component| self.describe_cycle(&level, &component, &edges, &member_name))
            .collect()
    }

    /// Whether the members in `component` are all single files already reported as a file cycle.
    fn is_file_cycle(&self, component: &[usize], member: &dyn Fn(usize) -> Option<usize>) -> bool {
        let files_of = |m: usize| {
            (0..self.files.len())
                .filter(|&f| member(f) == Some(m))
                .count()
        };
        component.iter().all(|&m| files_of(m) == 1)
    }

    fn describe_cycle(
        &self,
        what: &str,
        component: &[usize],
        edges: &BTreeMap<(usize, usize), Evidence>,
        name: &dyn Fn(usize) -> String,
    ) -> String {
        let members: Vec<String> = component.iter().map(|&m| name(m)).collect();
        let mut text = format!(
            "module cycle among {what} ({} members): {}\none cycle:",
            members.len(),
            members.join(", ")
        );
        let cycle = one_cycle(component, edges);
        for pair in cycle.windows(2) {
            let evidence = &edges[&(pair[0], pair[1])];
            let place = if evidence.path.contains(" line ") {
                evidence.path.clone()
            } else {
                format!("line {}: {}", evidence.line, evidence.path)
            };
            let _ = write!(
                text,
                "\n  {} → {}   ({place})",
                name(pair[0]),
                name(pair[1])
            );
        }
        text
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn strongly_connected(nodes: usize, edges: &BTreeMap<(usize, usize), Evidence>) -> Vec<Vec<usize>> {
    struct State {
        next: Vec<Vec<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        components: Vec<Vec<usize>>,
    }
    fn visit(state: &mut State, v: usize) {
        state.index[v] = Some(state.counter);
        state.low[v] = state.counter;
        state.counter += 1;
        state.stack.push(v);
        state.on_stack[v] = true;
        for w in state.next[v].clone() {
            match state.index[w] {
                None => {
                    visit(state, w);
                    state.low[v] = state.low[v].min(state.low[w]);
                }
                Some(index) if state.on_stack[w] => state.low[v] = state.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(state.low[v]) == state.index[v] {
            let mut component = Vec::new();
            loop {
                let w = state.stack.pop().unwrap();
                state.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.components.push(component);
            }
        }
    }
    let mut next = vec![Vec::new(); nodes];
    for &(from, to) in edges.keys() {
        next[from].push(to);
    }
    let mut state = State {
        next,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for v in 0..nodes {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.components
}

/// One shortest cycle through the first member of `component`, first member repeated at the end.
fn one_cycle(component: &[usize], edges: &BTreeMap<(usize, usize), Evidence>) -> Vec<usize> {
    let start = component[0];
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next_frontier = Vec::new();
        for &v in &frontier {
            for &(_, w) in edges.range((v, 0)..=(v, usize::MAX)).map(|(k, _)| k) {
                if !component.contains(&w) {
                    continue;
                }
                if w == start {
                    let mut cycle = vec![start, v];
                    let mut at = v;
                    while at != start {
                        at = came_from[&at];
                        cycle.push(at);
                    }
                    cycle.reverse();
                    return cycle;
                }
                if let std::collections::btree_map::Entry::Vacant(entry) = came_from.entry(w) {
                    entry.insert(v);
                    next_frontier.push(w);
                }
            }
        }
        frontier = next_frontier;
    }
    unreachable!("a strongly connected component has a cycle through each member")
}

// ---------------------------------------------------------------------------------------------
// Function length

impl ModuleTree {
    fn long_functions(&self) -> Vec<String> {
        self.files
            .iter()
            .flat_map(|file| {
                function_lengths(&file.tokens)
                    .into_iter()
                    .filter(|(_, _, lines)| *lines > MOST_FUNCTION_LINES)
                    .map(move |(name, line, lines)| {
                        format!(
                            "{} line {line}: fn {name} is {lines} lines long, at most \
                             {MOST_FUNCTION_LINES} allowed",
                            file.path.display()
                        )
                    })
            })
            .collect()
    }
}

/// Each function with a body: its name, the line of `fn` and its length in lines, from the `fn`
/// line to the closing brace's, both counted.
fn function_lengths(tokens: &[Spanned]) -> Vec<(String, usize, usize)> {
    let mut lengths = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        if !is_ident(Some(token), "fn") {
            continue;
        }
        // `fn(u32) -> u32` is a type, not a function.
        let Some(name) = ident_of(tokens.get(i + 1)) else {
            continue;
        };
        let Some(open) = body_start(tokens, i + 2) else {
            continue;
        };
        let close = item_end(tokens, open) - 1;
        lengths.push((
            name.to_string(),
            token.line,
            tokens[close].line - token.line + 1,
        ));
    }
    lengths
}

/// The body's `{` of the function whose signature continues at `start`; `None` for a
/// declaration without a body (`fn f();`).
fn body_start(tokens: &[Spanned], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, spanned) in tokens.iter().enumerate().skip(start) {
        match spanned.token {
            Token::Punct('(' | '[') => depth += 1,
            Token::Punct(')' | ']') => depth = depth.saturating_sub(1),
            Token::Punct('{') if depth == 0 => return Some(i),
            Token::Punct(';') if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// The reader, checked on small sources

mod reader_tests {
    use super::*;

    fn segments(paths: &[NamedPath]) -> Vec<String> {
        paths.iter().map(|p| p.segments.join("::")).collect()
    }

    #[test]
    fn use_groups_expand_with_self_aliases_and_globs() {
        let tokens = tokenize(
            "pub use crate::{a::{b, c as d, self}, e::*};\nuse super::super::f::G;\nuse ::ext::x;",
        );
        assert_eq!(
            segments(&used_paths(&tokens)),
            [
                "crate::a::b",
                "crate::a::c",
                "crate::a::self",
                "crate::e",
                "super::super::f::G",
                "::::ext::x"
            ]
        );
    }

    #[test]
    fn inline_paths_start_at_crate_super_self_or_a_child() {
        let children = BTreeSet::from(["lifecycle"]);
        let tokens = tokenize(
            "fn f() { crate::units::ms(1); super::g(); lifecycle::finish(); std::mem::take(x); \
             Self::new(); crate::a::B::<T>::new(); }",
        );
        assert_eq!(
            segments(&inline_paths(&tokens, &children)),
            [
                "crate::units::ms",
                "super::g",
                "lifecycle::finish",
                "crate::a::B"
            ]
        );
    }

    #[test]
    fn comments_strings_and_chars_hide_their_paths() {
        let tokens = tokenize(
            "/// see crate::a::B\n/* crate::c /* nested */ crate::d */ let s = \"crate::e\"; \
             let r = r#\"crate::f \"quoted\" \"#; let c = '\"'; let q = '\\''; fn g<'a>(x: &'a str) {}\n\
             let t = crate::h::I;",
        );
        assert_eq!(
            segments(&inline_paths(&tokens, &BTreeSet::new())),
            ["crate::h::I"]
        );
        assert_eq!(tokens.last().unwrap().line, 3);
    }

    #[test]
    fn test_items_are_left_out() {
        let tokens = without_test_items(tokenize(
            "use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; }\n#[cfg(test)]\nuse crate::c;\n\
             #[test]\nfn t() { crate::d::e(); }\n#[cfg(not(test))]\nuse crate::f;",
        ));
        assert_eq!(segments(&used_paths(&tokens)), ["crate::a", "crate::f"]);
    }

    #[test]
    fn function_length_counts_from_fn_to_closing_brace() {
        let tokens = tokenize(
            "trait T { fn declared(&self); }\nfn f(\n    x: [u8; 2],\n) -> u8 {\n    let f: fn(u8) -> u8 = g;\n    x[0]\n}\n",
        );
        assert_eq!(function_lengths(&tokens), [("f".to_string(), 2, 6)]);
    }
}
