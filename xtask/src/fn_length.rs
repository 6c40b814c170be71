//! No long functions on the run and request path.
//!
//! In the files of [`CHECKED`] (a path ending in `/` is every `.rs` file under it),
//! every function with a body (free functions, methods, trait methods with a
//! default body, functions nested in functions) is at most [`MAX_LINES`] lines
//! long, counted from the line of its `fn` keyword to the line of its closing brace
//! (attributes and docs above it do not count). Code under `#[cfg(test)]` is not
//! read. Files are parsed with syn; a file syn cannot parse is skipped (the
//! citations check reports it).
//!
//! [`KNOWN_LONG`] is a ratchet: the functions that were longer when the rule came
//! and wait for a split. Each may not grow past the length recorded there, and an
//! entry whose function is gone or fits the rule is a violation too, so the list
//! only shrinks.

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

/// (file, function, lines): functions longer than [`MAX_LINES`] when the rule came,
/// and the length each may not exceed until it is split. A method is
/// `Type::method`, a trait's default method `Trait::method`, a nested function
/// `outer::inner`.
const KNOWN_LONG: &[(&str, &str, usize)] = &[];

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
    let long = long_functions(text);
    for (line, name, lines) in &long {
        let known = KNOWN_LONG
            .iter()
            .find(|(file, function, _)| *file == path && function == name);
        let message = match known {
            None => format!(
                "fn {name} is {lines} lines long (at most {MAX_LINES} on the run and request path): split it"
            ),
            Some((_, _, max)) if lines > max => format!(
                "fn {name} is {lines} lines long; it waits for a split and may not grow past {max} (at most {MAX_LINES} is the rule)"
            ),
            Some(_) => continue,
        };
        violations.push(Violation {
            path: path.to_owned(),
            line: Some(*line),
            message,
        });
    }
    for (_, function, _) in KNOWN_LONG.iter().filter(|(file, ..)| *file == path) {
        if !long.iter().any(|(_, name, _)| name == function) {
            violations.push(Violation {
                path: path.to_owned(),
                line: None,
                message: format!(
                    "fn {function} is listed in xtask's KNOWN_LONG but is gone or at most {MAX_LINES} lines: remove the entry"
                ),
            });
        }
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

    #[test]
    fn known_long_functions_may_not_grow_and_leave_the_list() {
        let (path, name, max) = KNOWN_LONG[0];
        let lines = |text: &str| {
            let mut violations = Vec::new();
            check(path, text, &mut violations);
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(lines(&function(name, max - 2)), Vec::<String>::new());
        assert_eq!(
            lines(&function(name, max - 1)),
            [format!(
                "{path}:1: fn {name} is {} lines long; it waits for a split and may not grow past {max} (at most 80 is the rule)",
                max + 1
            )]
        );
        assert_eq!(
            lines(&function(name, MAX_LINES - 2)),
            [format!(
                "{path}: fn {name} is listed in xtask's KNOWN_LONG but is gone or at most 80 lines: remove the entry"
            )]
        );
    }
}
