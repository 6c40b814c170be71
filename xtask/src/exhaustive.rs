//! Wildcard arms over the enums that every crate of the workspace must handle.
//!
//! The enums of [`WATCHED`] are `#[cfg_attr(not(agent_workspace), non_exhaustive)]`:
//! the workspace builds with `--cfg agent_workspace` (`.cargo/config.toml`), so
//! inside it they are exhaustive and a variant added to one fails to compile in
//! every `match` that does not handle it, while a crate built outside the workspace
//! (a user's, without the cfg) still needs a wildcard. A wildcard arm in the
//! workspace would swallow the new variant silently, so:
//!
//! In a `match` (parsed with syn) one of whose arms names a variant of a watched
//! enum (`AiEventKind::TextDelta`, anywhere in the arm's pattern, through any path
//! ending in `Enum::Variant`), an arm whose whole pattern is `_` (with or without a
//! guard) must carry `#[cfg(not(agent_workspace))]`, unless the file belongs to the
//! crate that defines the enum (where the enum was always exhaustive). The arms the
//! wildcard covered inside the workspace are then listed.
//!
//! Not read: `if let`, `let ... else` and `matches!` (they pick one shape and say
//! so), matches inside macro calls (syn sees tokens), a variant named without its
//! enum (`use AiEventKind::TextDelta`), and code under `#[cfg(test)]` (a test's
//! `_ => panic!(..)` is a handling of its own).

use syn::visit::Visit;

use crate::tidy::Violation;

/// The watched enums and the crate that defines each.
pub(crate) const WATCHED: &[(&str, &str)] = &[
    ("AiEventKind", "ai-core"),
    ("ToolErrorCode", "ai-core"),
    ("ApprovalDecision", "ai-core"),
    ("Decision", "agent-graph"),
];

/// The attribute that keeps a wildcard arm for builds outside the workspace.
const OUTSIDE: &str = "#[cfg(not(agent_workspace))]";

/// Reports the wildcard arms of `text` (the file at repository path `path`, in the
/// crate `crate_name`) that hide new variants of a watched enum. A file syn cannot
/// parse is skipped (the citations check reports it).
pub(crate) fn check(path: &str, crate_name: &str, text: &str, violations: &mut Vec<Violation>) {
    let Ok(file) = syn::parse_file(text) else {
        return;
    };
    let mut visitor = Matches {
        crate_name,
        found: Vec::new(),
    };
    visitor.visit_file(&file);
    for (line, name) in visitor.found {
        violations.push(Violation {
            path: path.to_owned(),
            line: Some(line),
            message: format!(
                "a wildcard arm over {name} hides new variants: list them, or mark the arm {OUTSIDE}"
            ),
        });
    }
}

/// Walks a file's matches, skipping `#[cfg(test)]` items.
struct Matches<'a> {
    /// The crate of the file.
    crate_name: &'a str,
    /// (line, enum) of each unmarked wildcard arm.
    found: Vec<(usize, &'static str)>,
}

/// Whether `attrs` hold `#[cfg(<cfg>)]`, spacing ignored.
fn has_cfg(attrs: &[syn::Attribute], cfg: &str) -> bool {
    attrs.iter().any(|attr| {
        let syn::Meta::List(list) = &attr.meta else {
            return false;
        };
        list.path.is_ident("cfg")
            && list
                .tokens
                .to_string()
                .chars()
                .filter(|c| !c.is_whitespace())
                .eq(cfg.chars())
    })
}

/// The watched enums whose variants a pattern names (`Enum::Variant` paths).
#[derive(Default)]
struct Named(Vec<&'static str>);

impl Visit<'_> for Named {
    fn visit_path(&mut self, path: &syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        if let [.., owner, _variant] = segments.as_slice()
            && let Some((name, _)) = WATCHED.iter().find(|(name, _)| name == owner)
            && !self.0.contains(name)
        {
            self.0.push(name);
        }
        syn::visit::visit_path(self, path);
    }
}

impl<'ast> Visit<'ast> for Matches<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !has_cfg(attrs, "test") {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_expr_match(&mut self, expr: &'ast syn::ExprMatch) {
        let mut named = Named::default();
        for arm in &expr.arms {
            named.visit_pat(&arm.pat);
        }
        let foreign = named.0.iter().find(|name| {
            WATCHED
                .iter()
                .any(|(n, krate)| n == *name && *krate != self.crate_name)
        });
        if let Some(name) = foreign {
            for arm in &expr.arms {
                if let syn::Pat::Wild(wild) = &arm.pat
                    && !has_cfg(&arm.attrs, "not(agent_workspace)")
                {
                    let line = wild.underscore_token.span.start().line;
                    self.found.push((line, name));
                }
            }
        }
        syn::visit::visit_expr_match(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(crate_name: &str, text: &str) -> Vec<String> {
        let mut violations = Vec::new();
        check("x.rs", crate_name, text, &mut violations);
        violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn unmarked_wildcards_over_watched_enums_fail() {
        let text = "\
fn f(kind: &AiEventKind, code: ToolErrorCode) {
    match kind {
        AiEventKind::Done => {}
        _ => {}
    }
    match kind {
        ai_core::event::AiEventKind::Done => {}
        #[cfg(not(agent_workspace))]
        _ => {}
    }
    match Some(code) {
        Some(ToolErrorCode::Timeout) => {}
        _ if true => {}
        #[cfg( not( agent_workspace ) )]
        _ => {}
    }
    match x {
        Other::A => {}
        _ => {}
    }
    let y = match decision {
        Decision::Approve { .. } | Decision::Deny { .. } => 1,
        _ => 2,
    };
    matches!(kind, AiEventKind::Done);
}
#[cfg(test)]
mod tests {
    fn g() { match k { AiEventKind::Done => {} _ => {} } }
}
";
        assert_eq!(
            lines("agent-server", text),
            [
                "x.rs:4: a wildcard arm over AiEventKind hides new variants: list them, or mark the arm #[cfg(not(agent_workspace))]",
                "x.rs:13: a wildcard arm over ToolErrorCode hides new variants: list them, or mark the arm #[cfg(not(agent_workspace))]",
                "x.rs:23: a wildcard arm over Decision hides new variants: list them, or mark the arm #[cfg(not(agent_workspace))]",
            ]
        );
        // The defining crates' own matches are exhaustive anyway.
        assert_eq!(
            lines("ai-core", text),
            [
                "x.rs:23: a wildcard arm over Decision hides new variants: list them, or mark the arm #[cfg(not(agent_workspace))]"
            ]
        );
        assert_eq!(lines("agent-graph", text).len(), 2);
    }
}
