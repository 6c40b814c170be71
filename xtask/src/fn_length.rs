//! No long functions on the run and request path.
//!
//! In the files of [`CHECKED`] (a path ending in `/` is every `.rs` file under it),
//! every function with a body (free functions, methods, trait methods with a
//! default body, functions nested in functions) is at most [`MAX_LINES`] lines
//! long, counted from the line of its `fn` keyword to the line of its closing brace
//! (attributes and docs above it do not count). Code under `#[cfg(test)]` is not
//! read. Files are parsed with syn; a file syn cannot parse is skipped (the
//! citations check reports it). There are no exceptions: the last functions
//! that were longer when the rule came have been split.

use syn::visit::Visit;

use crate::tidy::Violation;

/// The longest a function may be, in lines.
pub(crate) const MAX_LINES: usize = 80;

/// The files read: a path, or a directory ending in `/`.
const CHECKED: &[&str] = &[
    "crates/agent-graph/src/run/",
    "crates/agent-server/src/chat.rs",
    "crates/agent-server/src/plan.rs",
    "crates/agent-server/src/relay.rs",
    "crates/agent-server/src/chats.rs",
    "crates/chat-protocol/src/",
    "crates/agent-durable/src/runs.rs",
    "crates/agent-durable/src/engine.rs",
];

/// Whether `path` (a repository path) is read.
pub(crate) fn checked(path: &str) -> bool {
    CHECKED
        .iter()
        .any(|checked| match checked.strip_suffix('/') {
            Some(dir) => path.starts_with(dir) && path[dir.len()..].starts_with('/'),
            None => path == *checked,
        })
}

/// The functions of `text` longer than [`MAX_LINES`]: (line of `fn`, name, lines).
pub(crate) fn long_functions(text: &str) -> Vec<(usize, String, usize)> {
    let Ok(file) = syn::parse_file(text) else {
        return Vec::new();
    };
    let mut visitor = Functions::default();
    visitor.visit_file(&file);
    visitor.long
}

/// Reports the long functions of `text`, the file at repository path `path`, when
/// the path is one of [`CHECKED`].
pub(crate) fn check(path: &str, text: &str, violations: &mut Vec<Violation>) {
    if !checked(path) {
        return;
    }
    for (line, name, lines) in long_functions(text) {
        violations.push(Violation {
            path: path.to_owned(),
            line: Some(line),
            message: format!(
                "fn {name} is {lines} lines long (at most {MAX_LINES} on the run and request path): split it"
            ),
        });
    }
}

/// Walks a file's functions, outside `#[cfg(test)]`.
#[derive(Default)]
struct Functions {
    /// The names of the enclosing impl or trait and functions.
    scope: Vec<String>,
    /// (line, name, lines) of each long function.
    long: Vec<(usize, String, usize)>,
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && matches!(&attr.meta, syn::Meta::List(list) if list.tokens.to_string() == "test")
    })
}

/// The name of an impl's self type (its last path segment).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(path) => path
            .path
            .segments
            .last()
            .map(|segment| segment.ident.to_string())
            .unwrap_or_default(),
        _ => "_".to_owned(),
    }
}

impl Functions {
    /// Measures the function `name` whose `fn` token is `fn_token` and body
    /// `block`, then walks the body under its name.
    fn function(
        &mut self,
        name: &syn::Ident,
        fn_token: &syn::token::Fn,
        block: &syn::Block,
        walk: impl FnOnce(&mut Self),
    ) {
        let start = fn_token.span.start().line;
        let end = block.brace_token.span.close().start().line;
        let lines = end + 1 - start;
        self.scope.push(name.to_string());
        if lines > MAX_LINES {
            self.long.push((start, self.scope.join("::"), lines));
        }
        walk(self);
        self.scope.pop();
    }
}

impl<'ast> Visit<'ast> for Functions {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if !is_test(&item.attrs) {
            syn::visit::visit_item_mod(self, item);
        }
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        if is_test(&item.attrs) {
            return;
        }
        self.scope.push(type_name(&item.self_ty));
        syn::visit::visit_item_impl(self, item);
        self.scope.pop();
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        if is_test(&item.attrs) {
            return;
        }
        self.scope.push(item.ident.to_string());
        syn::visit::visit_item_trait(self, item);
        self.scope.pop();
    }

    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        if is_test(&item.attrs) {
            return;
        }
        self.function(&item.sig.ident, &item.sig.fn_token, &item.block, |this| {
            syn::visit::visit_item_fn(this, item);
        });
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        if is_test(&item.attrs) {
            return;
        }
        self.function(&item.sig.ident, &item.sig.fn_token, &item.block, |this| {
            syn::visit::visit_impl_item_fn(this, item);
        });
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if is_test(&item.attrs) {
            return;
        }
        match &item.default {
            Some(block) => self.function(&item.sig.ident, &item.sig.fn_token, block, |this| {
                syn::visit::visit_trait_item_fn(this, item);
            }),
            None => syn::visit::visit_trait_item_fn(self, item),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function of `body` lines between its `fn` line and its closing brace.
    fn function(name: &str, body: usize) -> String {
        format!("fn {name}() {{\n{}}}\n", "    let _ = 1;\n".repeat(body))
    }

    #[test]
    fn paths_are_checked() {
        assert!(checked("crates/agent-graph/src/run/driver.rs"));
        assert!(checked("crates/agent-graph/src/run/deep/x.rs"));
        assert!(!checked("crates/agent-graph/src/runner.rs"));
        assert!(checked("crates/agent-server/src/chat.rs"));
        assert!(!checked("crates/agent-server/src/chats.rs.bak"));
        assert!(!checked("crates/agent-server/src/server.rs"));
    }

    #[test]
    fn long_functions_are_found() {
        let text = format!(
            "{}{}impl Runner {{\n    {}}}\ntrait T {{\n    {}}}\n#[cfg(test)]\nmod tests {{\n{}}}\n",
            function("fits", MAX_LINES - 2),
            function("outer", 2)
                .replace("{\n", &format!("{{\n{}", function("inner", MAX_LINES - 1))),
            function("method", MAX_LINES),
            function("provided", MAX_LINES - 1),
            function("long_test", 200),
        );
        let long = long_functions(&text);
        let names: Vec<(&str, usize)> = long
            .iter()
            .map(|(_, name, lines)| (name.as_str(), *lines))
            .collect();
        assert_eq!(
            names,
            [
                ("outer", MAX_LINES + 5),
                ("outer::inner", MAX_LINES + 1),
                ("Runner::method", MAX_LINES + 2),
                ("T::provided", MAX_LINES + 1),
            ]
        );
        let mut violations = Vec::new();
        check("crates/chat-protocol/src/x.rs", &text, &mut violations);
        assert_eq!(violations.len(), 4);
        assert_eq!(
            violations[0].to_string(),
            format!(
                "crates/chat-protocol/src/x.rs:{}: fn outer is {} lines long (at most 80 on the run and request path): split it",
                MAX_LINES + 1,
                MAX_LINES + 5
            )
        );
        violations.clear();
        check("crates/agent-graph/src/lib.rs", &text, &mut violations);
        assert!(violations.is_empty());
    }
}
