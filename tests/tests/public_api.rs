//! The public API of the seven library crates as reviewed text, one insta
//! snapshot per crate (`snapshots/public_api__<crate>.snap`): an API change
//! shows up as a diff in review, like a wire-format change.
//!
//! Generated from the source with `syn` (stable toolchain; `cargo
//! public-api` needs nightly rustdoc JSON): starting at `lib.rs`, follow
//! `pub mod` and `pub use` (through private modules and re-export chains)
//! to every public item, and print it without bodies, docs and attributes
//! other than `derive`, `repr` and `non_exhaustive`: structs with their
//! public fields (and a note when private fields exist), enums with their
//! variants, functions, traits, constants, statics and type aliases, plus
//! the public methods and constants of inherent impls and the headers of
//! trait impls for each exported type. A re-export of another crate's item
//! is listed as `pub use` (the item itself is in its own crate's listing).
//! `#[cfg(test)]` and `#[cfg(doctest)]` items are skipped.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::{
    Attribute, Block, ImplItem, Item, TraitItem, UseTree, Visibility, punctuated::Punctuated,
};

/// The seven published library crates: package name and source directory.
const CRATES: [(&str, &str); 7] = [
    ("strand-model", "crates/strand-model"),
    ("strand-records", "crates/strand-records"),
    ("strand-integrity", "crates/strand-integrity"),
    ("strand-usage", "crates/strand-usage"),
    ("strand-snapshot", "crates/strand-snapshot"),
    ("strand-machine", "crates/strand-machine"),
    ("strand", "crates/strand"),
];

/// A crate's modules by path (`[]` is the root), each with its items.
type Modules = BTreeMap<Vec<String>, Vec<Item>>;

fn is_cfg_test(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && {
            let text = a.meta.require_list().map(|l| l.tokens.to_string());
            text.is_ok_and(|t| t == "test" || t == "doctest")
        }
    })
}

/// Parses `file` as module `path` and, recursively, its `mod x;` children
/// (`x.rs` or `x/mod.rs` beside it, in `dir`).
fn load_module(modules: &mut Modules, path: Vec<String>, file: &Path, dir: &Path) {
    let text = std::fs::read_to_string(file).unwrap();
    let parsed = syn::parse_file(&text).unwrap();
    load_items(modules, path, parsed.items, dir);
}

fn load_items(modules: &mut Modules, path: Vec<String>, items: Vec<Item>, dir: &Path) {
    let mut kept = Vec::new();
    for item in items {
        if item_attrs(&item).is_some_and(is_cfg_test) {
            continue;
        }
        if let Item::Mod(m) = &item {
            let name = m.ident.to_string();
            let mut child = path.clone();
            child.push(name.clone());
            let child_dir = dir.join(&name);
            match &m.content {
                Some((_, inner)) => load_items(modules, child, inner.clone(), &child_dir),
                None => {
                    let flat = dir.join(format!("{name}.rs"));
                    let file = if flat.exists() {
                        flat
                    } else {
                        child_dir.join("mod.rs")
                    };
                    load_module(modules, child, &file, &child_dir);
                }
            }
        }
        kept.push(item);
    }
    modules.insert(path, kept);
}

/// The modules of the crate in `src_dir` (`lib.rs` at its root).
fn load_crate(src_dir: &Path) -> Modules {
    let mut modules = Modules::new();
    load_module(&mut modules, Vec::new(), &src_dir.join("lib.rs"), src_dir);
    modules
}

fn item_attrs(item: &Item) -> Option<&[Attribute]> {
    Some(match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => return None,
    })
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

fn item_ident(item: &Item) -> Option<String> {
    Some(
        match item {
            Item::Const(i) => &i.ident,
            Item::Enum(i) => &i.ident,
            Item::Fn(i) => &i.sig.ident,
            Item::Mod(i) => &i.ident,
            Item::Static(i) => &i.ident,
            Item::Struct(i) => &i.ident,
            Item::Trait(i) => &i.ident,
            Item::Type(i) => &i.ident,
            Item::Union(i) => &i.ident,
            _ => return None,
        }
        .to_string(),
    )
}

fn item_vis(item: &Item) -> Option<&Visibility> {
    Some(match item {
        Item::Const(i) => &i.vis,
        Item::Enum(i) => &i.vis,
        Item::Fn(i) => &i.vis,
        Item::Mod(i) => &i.vis,
        Item::Static(i) => &i.vis,
        Item::Struct(i) => &i.vis,
        Item::Trait(i) => &i.vis,
        Item::Type(i) => &i.vis,
        Item::Union(i) => &i.vis,
        Item::Use(i) => &i.vis,
        _ => return None,
    })
}

/// `use` trees flattened to (source path, exported name); `*` as the name
/// of a glob.
fn flatten_use(tree: &UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, n.ident.to_string()));
        }
        UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((path, r.rename.to_string()));
        }
        UseTree::Glob(_) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push((path, "*".into()));
        }
        UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Walks the exports of one crate.
struct Walker<'a> {
    krate: String,
    modules: &'a Modules,
    /// Exported path → rendered text.
    out: BTreeMap<String, String>,
    /// Every impl of the crate, for the exported types.
    impls: Vec<syn::ItemImpl>,
}

impl Walker<'_> {
    /// Resolves `path` (as written in module `at`) to a module path and the
    /// remaining name, or `None` for another crate's item.
    fn resolve_module(&self, at: &[String], path: &[String]) -> Option<(Vec<String>, String)> {
        let (name, dirs) = path.split_last()?;
        let mut module: Vec<String> = match dirs.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self") | Some("super") => at.to_vec(),
            Some(first) => {
                let mut child = at.to_vec();
                child.push(first.to_string());
                if !self.modules.contains_key(&child) {
                    return None;
                }
                at.to_vec()
            }
            None => at.to_vec(),
        };
        for seg in dirs {
            match seg.as_str() {
                "crate" | "self" => {}
                "super" => {
                    module.pop();
                }
                other => module.push(other.to_string()),
            }
        }
        self.modules
            .contains_key(&module)
            .then(|| (module, name.clone()))
    }

    /// Exports everything public of module `at` under `prefix`.
    fn export_module(&mut self, at: &[String], prefix: &str) {
        let items = self.modules[at].clone();
        for item in &items {
            if item_vis(item).is_some_and(is_pub) {
                self.export_item(at, item, prefix, None);
            }
        }
    }

    /// Exports `item` of module `at` under `prefix`, named `rename` or its
    /// own name.
    fn export_item(&mut self, at: &[String], item: &Item, prefix: &str, rename: Option<&str>) {
        if let Item::Use(u) = item {
            let mut uses = Vec::new();
            flatten_use(&u.tree, &mut Vec::new(), &mut uses);
            for (path, name) in uses {
                self.export_use(at, &path, &name, prefix);
            }
            return;
        }
        let Some(ident) = item_ident(item) else {
            return;
        };
        let name = rename.unwrap_or(&ident).to_string();
        let exported = format!("{prefix}::{name}");
        if let Item::Mod(_) = item {
            let mut child = at.to_vec();
            child.push(ident);
            self.out
                .insert(exported.clone(), format!("pub mod {exported}"));
            self.export_module(&child, &exported);
            return;
        }
        let text = self.render(item, &ident);
        self.out.insert(exported, text);
    }

    fn export_use(&mut self, at: &[String], path: &[String], name: &str, prefix: &str) {
        let Some((module, item_name)) = self.resolve_module(at, path) else {
            let shown = path.join("::");
            let exported = format!("{prefix}::{name}");
            let last = path.last().map_or("", String::as_str);
            let text = if last == name || name == "*" {
                format!("pub use {shown}")
            } else {
                format!("pub use {shown} as {name}")
            };
            self.out.insert(exported, text);
            return;
        };
        let items = self.modules[&module].clone();
        if item_name == "*" {
            for item in &items {
                if item_vis(item).is_some_and(is_pub) {
                    self.export_item(&module, item, prefix, None);
                }
            }
            return;
        }
        let mut found = false;
        for item in &items {
            if item_ident(item).as_deref() == Some(item_name.as_str()) {
                found = true;
                self.export_item(&module, item, prefix, Some(name));
            }
        }
        if !found {
            // A re-export chain: `pub use` (or `use`) of that name in module.
            for item in &items {
                if let Item::Use(u) = item {
                    let mut uses = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut uses);
                    for (p, n) in uses {
                        if n == item_name {
                            found = true;
                            self.export_use(&module, &p, name, prefix);
                        }
                    }
                }
            }
        }
        assert!(
            found,
            "{}: cannot resolve `{}`",
            self.krate,
            path.join("::")
        );
    }

    /// The item without bodies, docs and most attributes, plus the public
    /// members of its impls when it is a type.
    fn render(&self, item: &Item, ident: &str) -> String {
        let mut item = item.clone();
        let mut notes = Vec::new();
        let mut is_type = false;
        match &mut item {
            Item::Fn(f) => {
                f.attrs.clear();
                *f.block = empty_block();
            }
            Item::Struct(s) => {
                is_type = true;
                s.attrs.retain(keep_attr);
                let total = s.fields.len();
                match &mut s.fields {
                    syn::Fields::Named(named) => {
                        let kept: Punctuated<_, _> = named
                            .named
                            .iter()
                            .filter(|f| is_pub(&f.vis))
                            .cloned()
                            .map(strip_field)
                            .collect();
                        named.named = kept;
                    }
                    syn::Fields::Unnamed(unnamed) => {
                        let kept: Punctuated<_, _> = unnamed
                            .unnamed
                            .iter()
                            .filter(|f| is_pub(&f.vis))
                            .cloned()
                            .map(strip_field)
                            .collect();
                        unnamed.unnamed = kept;
                    }
                    syn::Fields::Unit => {}
                }
                if s.fields.len() < total {
                    notes.push(format!("// {ident} has private fields"));
                }
            }
            Item::Enum(e) => {
                is_type = true;
                e.attrs.retain(keep_attr);
                for v in &mut e.variants {
                    v.attrs.clear();
                    for f in v.fields.iter_mut() {
                        f.attrs.clear();
                    }
                }
            }
            Item::Union(u) => {
                is_type = true;
                u.attrs.retain(keep_attr);
            }
            Item::Trait(t) => {
                t.attrs.clear();
                for ti in &mut t.items {
                    match ti {
                        TraitItem::Fn(f) => {
                            f.attrs.clear();
                            f.default = None;
                            f.semi_token = Some(Default::default());
                        }
                        TraitItem::Const(c) => {
                            c.attrs.clear();
                            c.default = None;
                        }
                        TraitItem::Type(t) => t.attrs.clear(),
                        _ => {}
                    }
                }
            }
            Item::Const(c) => c.attrs.clear(),
            Item::Static(s) => s.attrs.clear(),
            Item::Type(t) => {
                is_type = true;
                t.attrs.clear();
            }
            _ => {}
        }
        let mut text = unparse(item);
        for note in notes {
            text.push_str(&note);
            text.push('\n');
        }
        if is_type {
            text.push_str(&self.render_impls(ident));
        }
        text
    }

    /// The inherent impls' public methods and constants, and the trait
    /// impls' headers, of every type named `ident`.
    fn render_impls(&self, ident: &str) -> String {
        let mut inherent = Vec::new();
        let mut traits = BTreeSet::new();
        for imp in &self.impls {
            let syn::Type::Path(tp) = &*imp.self_ty else {
                continue;
            };
            if tp.path.segments.last().is_none_or(|s| s.ident != ident) {
                continue;
            }
            let mut imp = imp.clone();
            imp.attrs.clear();
            if imp.trait_.is_some() {
                imp.items.clear();
                traits.insert(unparse(Item::Impl(imp)));
                continue;
            }
            imp.items.retain(|i| match i {
                ImplItem::Fn(f) => is_pub(&f.vis),
                ImplItem::Const(c) => is_pub(&c.vis),
                _ => false,
            });
            if imp.items.is_empty() {
                continue;
            }
            for i in &mut imp.items {
                match i {
                    ImplItem::Fn(f) => {
                        f.attrs.clear();
                        f.block = empty_block();
                    }
                    ImplItem::Const(c) => c.attrs.clear(),
                    _ => {}
                }
            }
            inherent.push(unparse(Item::Impl(imp)));
        }
        inherent.sort();
        inherent.into_iter().chain(traits).collect()
    }
}

fn keep_attr(a: &Attribute) -> bool {
    ["derive", "repr", "non_exhaustive"]
        .iter()
        .any(|k| a.path().is_ident(k))
}

fn strip_field(mut f: syn::Field) -> syn::Field {
    f.attrs.clear();
    f
}

fn empty_block() -> Block {
    Block {
        brace_token: Default::default(),
        stmts: Vec::new(),
    }
}

fn unparse(item: Item) -> String {
    prettyplease::unparse(&syn::File {
        shebang: None,
        attrs: Vec::new(),
        items: vec![item],
    })
}

fn collect_impls(modules: &Modules) -> Vec<syn::ItemImpl> {
    let mut out = Vec::new();
    for items in modules.values() {
        for item in items {
            if let Item::Impl(imp) = item {
                out.push(imp.clone());
            }
        }
    }
    out
}

/// The listing of the crate whose `lib.rs` is in `src_dir`.
fn public_api(krate: &str, src_dir: &Path) -> String {
    let modules = load_crate(src_dir);
    let lib_name = krate.replace('-', "_");
    let mut walker = Walker {
        krate: krate.to_string(),
        modules: &modules,
        out: BTreeMap::new(),
        impls: collect_impls(&modules),
    };
    walker.export_module(&[], &lib_name);
    let mut text = String::new();
    for (path, item) in &walker.out {
        text.push_str(&format!("=== {path}\n{}\n", item.trim_end()));
    }
    text
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn public_api_of_the_library_crates() {
    for (krate, dir) in CRATES {
        let text = public_api(krate, &workspace_root().join(dir).join("src"));
        insta::assert_snapshot!(krate, text);
    }
}

/// The generator itself: a public item added anywhere reachable shows up,
/// and nothing private does.
#[test]
fn the_listing_sees_every_reachable_public_item() {
    let dir = tempfile_dir();
    std::fs::write(
        dir.join("lib.rs"),
        "mod inner;\npub mod open;\npub use inner::{Shown, shown as renamed};\n\
         pub use other_crate::Thing;\npub(crate) fn hidden() {}\nfn private() {}\n\
         #[cfg(test)]\nmod tests { pub fn test_only() {} }\n\
         #[cfg(doctest)]\npub struct DoctestOnly;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("inner.rs"),
        "#[derive(Debug)]\npub struct Shown { pub a: u8, b: u8 }\n\
         impl Shown { pub fn method(&self) -> u8 { self.a } fn private(&self) {} }\n\
         impl std::fmt::Display for Shown { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { Ok(()) } }\n\
         pub fn shown(x: u32) -> u32 { x }\npub struct NotExported;\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("open.rs"),
        "pub const LIMIT: u64 = 3;\npub enum Choice { A, B(u8) }\n",
    )
    .unwrap();
    let text = public_api("demo-crate", &dir);
    insta::assert_snapshot!("generator_self_test", text);
    for expected in [
        "=== demo_crate::Shown",
        "pub a: u8",
        "// Shown has private fields",
        "pub fn method(&self) -> u8",
        "impl std::fmt::Display for Shown",
        "=== demo_crate::renamed",
        "pub fn shown(x: u32) -> u32",
        "=== demo_crate::Thing\npub use other_crate::Thing",
        "=== demo_crate::open::LIMIT",
        "=== demo_crate::open::Choice",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    for absent in [
        "hidden",
        "fn private",
        "test_only",
        "DoctestOnly",
        "NotExported",
        " b: u8",
    ] {
        assert!(!text.contains(absent), "{absent:?} listed in\n{text}");
    }
}

/// A fresh directory under the target directory for the self-test.
fn tempfile_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("public-api-self-test");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
