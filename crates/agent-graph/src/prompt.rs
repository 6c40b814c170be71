//! Prompts built from sections that contribute tools.
//!
//! A [`Prompt`] is an ordered tree of [`Section`]s. Each section has a title, a
//! template with named `{placeholders}` (`{name?}` is optional and renders empty when
//! the parameter is missing; `{{` and `}}` are literal braces), a predicate over the
//! run's [`Params`] that decides whether it is enabled, child sections, tools it
//! contributes, and per-tool description overrides.
//!
//! [`Prompt::render`] walks the tree depth-first. A disabled section is skipped with
//! its children: their text, their tools and their overrides. The result is the
//! rendered system text and the contributed tools of the enabled sections in
//! declaration order (a section's own tools before its children's), with the
//! overrides of enabled sections applied to their specs (description and top-level
//! parameter descriptions, so they change what the model is sent and the schema
//! hash). [`prompt_hash`] keys telemetry and caches on what was sent.
//!
//! Construction ([`Prompt::new`]) fails on a tool id contributed twice (naming both
//! sections), an override of a tool or parameter that does not exist, and a malformed
//! template. Rendering fails on a missing required placeholder (naming it and its
//! section).
//!
//! Contributed tools still run only through the `ToolRunner`: register
//! [`Prompt::tools`] with the runner; rendering decides which of them are offered.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ai_core::{
    ToolSpec,
    tool::{RegisteredTool, schema_hash},
};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The run's parameters a prompt is rendered with.
pub type Params = serde_json::Map<String, Value>;

type Predicate = Arc<dyn Fn(&Params) -> bool + Send + Sync>;

/// Replaces what the model is told about one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOverride {
    /// New tool description.
    pub description: Option<String>,
    /// New descriptions of top-level parameters, by property name.
    pub parameters: BTreeMap<String, String>,
}

impl ToolOverride {
    /// An override of the tool's description.
    pub fn description(text: impl Into<String>) -> Self {
        Self {
            description: Some(text.into()),
            parameters: BTreeMap::new(),
        }
    }

    /// Also overrides the description of the top-level parameter `name`.
    pub fn parameter(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.parameters.insert(name.into(), text.into());
        self
    }
}

/// One section of a [`Prompt`]; see the module docs.
#[derive(Clone)]
pub struct Section {
    title: String,
    template: String,
    enabled: Option<Predicate>,
    children: Vec<Section>,
    tools: Vec<RegisteredTool>,
    overrides: Vec<(String, ToolOverride)>,
}

impl fmt::Debug for Section {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Section")
            .field("title", &self.title)
            .field("conditional", &self.enabled.is_some())
            .field("children", &self.children)
            .field("tools", &self.tools)
            .field("overrides", &self.overrides)
            .finish()
    }
}

impl Section {
    /// An always-enabled section with a title and a template.
    pub fn new(title: impl Into<String>, template: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            template: template.into(),
            enabled: None,
            children: Vec::new(),
            tools: Vec::new(),
            overrides: Vec::new(),
        }
    }

    /// The section (with its children and their tools) is rendered only when
    /// `predicate` holds for the run's parameters.
    pub fn enabled_when(
        mut self,
        predicate: impl Fn(&Params) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.enabled = Some(Arc::new(predicate));
        self
    }

    /// Enabled when the parameter `key` is present and truthy (`true`, a non-empty
    /// string, array or object, a non-zero number).
    pub fn enabled_if(self, key: impl Into<String>) -> Self {
        let key = key.into();
        self.enabled_when(move |params| params.get(&key).is_some_and(truthy))
    }

    /// Appends a child section.
    pub fn child(mut self, section: Section) -> Self {
        self.children.push(section);
        self
    }

    /// Contributes a tool, offered whenever the section is enabled.
    pub fn tool(mut self, tool: impl Into<RegisteredTool>) -> Self {
        self.tools.push(tool.into());
        self
    }

    /// Overrides what the model is told about the tool `id` while this section is
    /// enabled (a later enabled section's override wins).
    pub fn override_tool(mut self, id: impl Into<String>, with: ToolOverride) -> Self {
        self.overrides.push((id.into(), with));
        self
    }

    /// The title.
    pub fn title(&self) -> &str {
        &self.title
    }
}

fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Why a prompt cannot be built or rendered. Sections are named by their path of
/// titles (`Tools > Search`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PromptError {
    /// Two sections (or one section twice) contribute the same tool id.
    #[error("tool `{tool}` is contributed by both section `{first}` and section `{second}`")]
    DuplicateTool {
        /// The tool id.
        tool: String,
        /// The section that contributed it first.
        first: String,
        /// The section that contributed it again.
        second: String,
    },
    /// A required placeholder has no parameter.
    #[error("section `{section}` needs the parameter `{placeholder}`, which was not given")]
    MissingPlaceholder {
        /// The placeholder name.
        placeholder: String,
        /// The section.
        section: String,
    },
    /// A template is malformed (an unclosed `{`, a stray `}` or a bad name).
    #[error("section `{section}` has a malformed template: {message}")]
    InvalidTemplate {
        /// The section.
        section: String,
        /// What is wrong.
        message: String,
    },
    /// An override names a tool no section contributes.
    #[error("section `{section}` overrides tool `{tool}`, which no section contributes")]
    UnknownOverride {
        /// The tool id.
        tool: String,
        /// The section.
        section: String,
    },
    /// An override names a parameter the tool's schema does not have.
    #[error(
        "section `{section}` overrides parameter `{parameter}` of tool `{tool}`, which has no such parameter"
    )]
    UnknownParameter {
        /// The tool id.
        tool: String,
        /// The parameter.
        parameter: String,
        /// The section.
        section: String,
    },
}

/// A piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Placeholder { name: String, optional: bool },
}

fn parse_template(template: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '{' if chars.peek().is_some_and(|&(_, n)| n == '{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().is_some_and(|&(_, n)| n == '}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err(format!("a `}}` at byte {at} closes nothing (write `}}}}`)")),
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, n) in chars.by_ref() {
                    if n == '}' {
                        closed = true;
                        break;
                    }
                    name.push(n);
                }
                if !closed {
                    return Err(format!(
                        "the `{{` at byte {at} is not closed (write `{{{{`)"
                    ));
                }
                let (name, optional) = match name.strip_suffix('?') {
                    Some(stripped) => (stripped.to_owned(), true),
                    None => (name, false),
                };
                let valid = !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
                if !valid {
                    return Err(format!(
                        "placeholder at byte {at} must be a name of [A-Za-z0-9_.-]"
                    ));
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Placeholder { name, optional });
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// A checked tree of sections; see the module docs.
#[derive(Clone)]
pub struct Prompt {
    sections: Vec<Node>,
}

#[derive(Clone)]
struct Node {
    path: String,
    section: Section,
    pieces: Vec<Piece>,
    children: Vec<Node>,
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn walk<'a>(nodes: &'a [Node], out: &mut Vec<&'a str>) {
            for node in nodes {
                out.push(&node.path);
                walk(&node.children, out);
            }
        }
        let mut paths = Vec::new();
        walk(&self.sections, &mut paths);
        f.debug_struct("Prompt").field("sections", &paths).finish()
    }
}

/// A rendered prompt: the system text and the tools it offers.
#[derive(Debug, Clone)]
pub struct RenderedPrompt {
    /// The system text.
    pub text: String,
    /// The tools of the enabled sections, in declaration order, with overrides
    /// applied to their specs.
    pub tools: Vec<RegisteredTool>,
    /// The paths of the rendered (enabled) sections, in order.
    pub sections: Vec<String>,
}

impl RenderedPrompt {
    /// The offered specs, in declaration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    /// The [`prompt_hash`] of this prompt sent to `model`.
    pub fn hash(&self, model: &str) -> String {
        prompt_hash(&self.text, self.tools.iter().map(|t| &t.spec), model)
    }
}

/// A stable `sha256:<hex>` over the rendered system prompt, the model id and, per
/// offered tool (in the given order), its id, description and schema hash (which
/// covers parameter descriptions). Equal inputs give equal hashes on every platform.
pub fn prompt_hash<'a>(
    system: &str,
    tools: impl IntoIterator<Item = &'a ToolSpec>,
    model: &str,
) -> String {
    let mut hasher = Sha256::new();
    // Length-prefixed fields: no two inputs share an encoding.
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(b"prompt-hash-v1");
    field(model.as_bytes());
    field(system.as_bytes());
    for spec in tools {
        field(spec.id.as_str().as_bytes());
        field(spec.description.as_bytes());
        field(spec.schema_hash.as_bytes());
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

impl Prompt {
    /// Checks and builds a prompt from top-level sections in order.
    pub fn new(sections: impl IntoIterator<Item = Section>) -> Result<Self, PromptError> {
        fn build(section: Section, parent: Option<&str>) -> Result<Node, PromptError> {
            let path = match parent {
                Some(parent) => format!("{parent} > {}", section.title),
                None => section.title.clone(),
            };
            let pieces = parse_template(&section.template).map_err(|message| {
                PromptError::InvalidTemplate {
                    section: path.clone(),
                    message,
                }
            })?;
            let children = section
                .children
                .iter()
                .cloned()
                .map(|child| build(child, Some(&path)))
                .collect::<Result<_, _>>()?;
            Ok(Node {
                path,
                section,
                pieces,
                children,
            })
        }
        let sections: Vec<Node> = sections
            .into_iter()
            .map(|s| build(s, None))
            .collect::<Result<_, _>>()?;
        let prompt = Self { sections };

        // Tool ids are unique across the tree.
        let mut owners: BTreeMap<String, (String, Value)> = BTreeMap::new();
        let mut error = None;
        prompt.walk(&mut |node| {
            for tool in &node.section.tools {
                let id = tool.spec.id.as_str().to_owned();
                if let Some((first, _)) = owners.get(&id) {
                    error.get_or_insert(PromptError::DuplicateTool {
                        tool: id,
                        first: first.clone(),
                        second: node.path.clone(),
                    });
                } else {
                    owners.insert(id, (node.path.clone(), tool.spec.input_schema.clone()));
                }
            }
        });
        // Overrides name contributed tools and their parameters.
        prompt.walk(&mut |node| {
            for (tool, with) in &node.section.overrides {
                let Some((_, schema)) = owners.get(tool) else {
                    error.get_or_insert(PromptError::UnknownOverride {
                        tool: tool.clone(),
                        section: node.path.clone(),
                    });
                    continue;
                };
                for parameter in with.parameters.keys() {
                    if schema
                        .get("properties")
                        .and_then(|p| p.get(parameter))
                        .is_none()
                    {
                        error.get_or_insert(PromptError::UnknownParameter {
                            tool: tool.clone(),
                            parameter: parameter.clone(),
                            section: node.path.clone(),
                        });
                    }
                }
            }
        });
        match error {
            Some(error) => Err(error),
            None => Ok(prompt),
        }
    }

    fn walk(&self, visit: &mut impl FnMut(&Node)) {
        fn go(nodes: &[Node], visit: &mut impl FnMut(&Node)) {
            for node in nodes {
                visit(node);
                go(&node.children, visit);
            }
        }
        go(&self.sections, visit);
    }

    /// Every tool any section contributes (enabled or not), in declaration order:
    /// what to register with the `ToolRunner`.
    pub fn tools(&self) -> Vec<RegisteredTool> {
        let mut out = Vec::new();
        self.walk(&mut |node| out.extend(node.section.tools.iter().cloned()));
        out
    }

    /// Renders the enabled sections for `params`; see the module docs.
    pub fn render(&self, params: &Params) -> Result<RenderedPrompt, PromptError> {
        let mut blocks = Vec::new();
        let mut tools = Vec::new();
        let mut overrides: Vec<(String, ToolOverride)> = Vec::new();
        let mut sections = Vec::new();
        render_nodes(
            &self.sections,
            0,
            params,
            &mut blocks,
            &mut tools,
            &mut overrides,
            &mut sections,
        )?;
        for (id, with) in overrides {
            if let Some(tool) = tools.iter_mut().find(|t| t.spec.id.as_str() == id) {
                apply_override(&mut tool.spec, &with);
            }
        }
        Ok(RenderedPrompt {
            text: blocks.join("\n\n"),
            tools,
            sections,
        })
    }
}

fn render_nodes(
    nodes: &[Node],
    depth: usize,
    params: &Params,
    blocks: &mut Vec<String>,
    tools: &mut Vec<RegisteredTool>,
    overrides: &mut Vec<(String, ToolOverride)>,
    sections: &mut Vec<String>,
) -> Result<(), PromptError> {
    for node in nodes {
        if node.section.enabled.as_ref().is_some_and(|p| !p(params)) {
            continue;
        }
        let mut body = String::new();
        for piece in &node.pieces {
            match piece {
                Piece::Text(text) => body.push_str(text),
                Piece::Placeholder { name, optional } => match params.get(name) {
                    Some(Value::String(s)) => body.push_str(s),
                    Some(other) => body.push_str(&other.to_string()),
                    None if *optional => {}
                    None => {
                        return Err(PromptError::MissingPlaceholder {
                            placeholder: name.clone(),
                            section: node.path.clone(),
                        });
                    }
                },
            }
        }
        let heading = format!("{} {}", "#".repeat((depth + 1).min(6)), node.section.title);
        let body = body.trim();
        blocks.push(if body.is_empty() {
            heading
        } else {
            format!("{heading}\n\n{body}")
        });
        sections.push(node.path.clone());
        tools.extend(node.section.tools.iter().cloned());
        overrides.extend(node.section.overrides.iter().cloned());
        render_nodes(
            &node.children,
            depth + 1,
            params,
            blocks,
            tools,
            overrides,
            sections,
        )?;
    }
    Ok(())
}

fn apply_override(spec: &mut ToolSpec, with: &ToolOverride) {
    if let Some(description) = &with.description {
        spec.description = description.clone();
    }
    for (name, description) in &with.parameters {
        if let Some(Value::Object(property)) = spec
            .input_schema
            .get_mut("properties")
            .and_then(|p| p.get_mut(name))
        {
            property.insert("description".into(), Value::String(description.clone()));
        }
    }
    spec.schema_hash = schema_hash(&spec.input_schema, spec.output_schema.as_ref());
}
