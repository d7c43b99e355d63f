//! Parsing of attribute arguments.
//!
//! The arguments are split at top-level commas and each piece is parsed on
//! its own, so one bad argument does not hide the errors of the others.

use hooks_core::{Capability, normalize_tool_name};
use proc_macro2::{Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Path, Token, UnOp, bracketed, token};

use crate::errors::Errors;

mod kw {
    syn::custom_keyword!(tools);
    syn::custom_keyword!(agents);
    syn::custom_keyword!(capabilities);
    syn::custom_keyword!(order);
    syn::custom_keyword!(timeout_ms);
    syn::custom_keyword!(fail_closed);
    syn::custom_keyword!(unchecked_filters);
}

/// The argument `#[crew_base]` leaves on the attributes it has collected, so
/// that they stay resolved (no "unused import") and expand to nothing more
/// than the method itself.
pub(crate) const COLLECTED: &str = "__crew_base_collected";

/// Whether an attribute's arguments are the [`COLLECTED`] marker.
pub(crate) fn is_collected(args: &TokenStream) -> bool {
    let mut tokens = args.clone().into_iter();
    matches!(
        (tokens.next(), tokens.next()),
        (Some(TokenTree::Ident(ident)), None) if ident == COLLECTED
    )
}

/// Which hook attribute is being expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HookKind {
    /// `#[on(POINT, ...)]`.
    On,
    /// `#[before_tool_call]`.
    BeforeToolCall,
    /// `#[after_tool_call]`.
    AfterToolCall,
    /// `#[before_llm_call]`.
    BeforeLlmCall,
    /// `#[after_llm_call]`.
    AfterLlmCall,
}

impl HookKind {
    /// The attribute's name, for messages.
    pub(crate) fn attribute(self) -> &'static str {
        match self {
            HookKind::On => "on",
            HookKind::BeforeToolCall => "before_tool_call",
            HookKind::AfterToolCall => "after_tool_call",
            HookKind::BeforeLlmCall => "before_llm_call",
            HookKind::AfterLlmCall => "after_llm_call",
        }
    }

    /// The point a legacy attribute always runs at.
    pub(crate) fn fixed_point(self) -> Option<Point> {
        match self {
            HookKind::On => None,
            HookKind::BeforeToolCall => Some(Point::PreToolCall),
            HookKind::AfterToolCall => Some(Point::PostToolCall),
            HookKind::BeforeLlmCall => Some(Point::PreModelCall),
            HookKind::AfterLlmCall => Some(Point::PostModelCall),
        }
    }

    /// Whether `false` blocks (the legacy before styles).
    pub(crate) fn is_legacy_before(self) -> bool {
        matches!(self, HookKind::BeforeToolCall | HookKind::BeforeLlmCall)
    }

    /// The hook attribute an attribute path names, by its last segment.
    pub(crate) fn from_path(path: &Path) -> Option<HookKind> {
        let last = path.segments.last()?;
        if last.ident == "on" {
            Some(HookKind::On)
        } else if last.ident == "before_tool_call" {
            Some(HookKind::BeforeToolCall)
        } else if last.ident == "after_tool_call" {
            Some(HookKind::AfterToolCall)
        } else if last.ident == "before_llm_call" {
            Some(HookKind::BeforeLlmCall)
        } else if last.ident == "after_llm_call" {
            Some(HookKind::AfterLlmCall)
        } else {
            None
        }
    }
}

/// Where a hook runs: one row per interception point (the macros' point
/// table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    ExecutionStart,
    Input,
    PreStep,
    PreModelCall,
    PostModelCall,
    PreToolCall,
    PostToolCall,
    PostStep,
    Output,
    ExecutionEnd,
}

/// `(point, its name, its marker type, its link-time slice, its context,
/// takes tools, takes agents)`.
type PointRow = (
    Point,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
);

const POINTS: [PointRow; 10] = [
    (
        Point::ExecutionStart,
        "EXECUTION_START",
        "ExecutionStart",
        "EXECUTION_START_HOOKS",
        "ExecutionStartContext",
        false,
        false,
    ),
    (
        Point::Input,
        "INPUT",
        "Input",
        "INPUT_HOOKS",
        "InputContext",
        false,
        false,
    ),
    (
        Point::PreStep,
        "PRE_STEP",
        "PreStep",
        "PRE_STEP_HOOKS",
        "StepContext",
        false,
        true,
    ),
    (
        Point::PreModelCall,
        "PRE_MODEL_CALL",
        "PreModelCall",
        "PRE_MODEL_CALL_HOOKS",
        "LlmCallHookContext",
        false,
        true,
    ),
    (
        Point::PostModelCall,
        "POST_MODEL_CALL",
        "PostModelCall",
        "POST_MODEL_CALL_HOOKS",
        "LlmCallHookContext",
        false,
        true,
    ),
    (
        Point::PreToolCall,
        "PRE_TOOL_CALL",
        "PreToolCall",
        "PRE_TOOL_CALL_HOOKS",
        "ToolCallHookContext",
        true,
        true,
    ),
    (
        Point::PostToolCall,
        "POST_TOOL_CALL",
        "PostToolCall",
        "POST_TOOL_CALL_HOOKS",
        "ToolCallHookContext",
        true,
        true,
    ),
    (
        Point::PostStep,
        "POST_STEP",
        "PostStep",
        "POST_STEP_HOOKS",
        "StepContext",
        false,
        true,
    ),
    (
        Point::Output,
        "OUTPUT",
        "Output",
        "OUTPUT_HOOKS",
        "OutputContext",
        false,
        false,
    ),
    (
        Point::ExecutionEnd,
        "EXECUTION_END",
        "ExecutionEnd",
        "EXECUTION_END_HOOKS",
        "ExecutionEndContext",
        false,
        false,
    ),
];

/// Every point's name, for messages.
const POINT_NAMES: &str = "EXECUTION_START, INPUT, PRE_STEP, PRE_MODEL_CALL, POST_MODEL_CALL, \
                           PRE_TOOL_CALL, POST_TOOL_CALL, POST_STEP, OUTPUT, EXECUTION_END";

impl Point {
    fn row(self) -> &'static PointRow {
        // Every point has its row.
        POINTS
            .iter()
            .find(|row| row.0 == self)
            .unwrap_or(&POINTS[0])
    }

    fn from_name(name: &str) -> Option<Point> {
        POINTS.iter().find(|row| row.1 == name).map(|row| row.0)
    }

    /// The guide's spelling, e.g. `PRE_TOOL_CALL`.
    pub(crate) fn name(self) -> &'static str {
        self.row().1
    }

    /// The marker type in `hooks_core::points`.
    pub(crate) fn marker(self) -> &'static str {
        self.row().2
    }

    /// The link-time slice in `hooks_core::__private`.
    pub(crate) fn slice(self) -> &'static str {
        self.row().3
    }

    /// The context type's name.
    pub(crate) fn context(self) -> &'static str {
        self.row().4
    }

    fn takes_tools(self) -> bool {
        self.row().5
    }

    fn takes_agents(self) -> bool {
        self.row().6
    }
}

/// The arguments of one hook attribute, with defaults filled in.
pub(crate) struct HookArgs {
    pub(crate) kind: HookKind,
    /// `None` only when `#[on]` had no valid point (an error was recorded).
    pub(crate) point: Option<Point>,
    /// Normalized tool names, without repeats.
    pub(crate) tools: Vec<String>,
    /// Agent roles, without repeats.
    pub(crate) agents: Vec<String>,
    /// Capabilities, without repeats.
    pub(crate) capabilities: Vec<Capability>,
    pub(crate) order: i32,
    pub(crate) fail_closed: bool,
    /// `timeout_ms = N`, with where its key was written.
    pub(crate) timeout_ms: Option<(u64, Span)>,
    /// `unchecked_filters`: leave the hook out of the crews' filter check.
    pub(crate) unchecked_filters: bool,
    /// `crate = path`.
    pub(crate) krate: Option<Path>,
}

/// Each argument may be given once; `set_once` is the one place that
/// enforces it.
#[derive(Default)]
struct Slots {
    tools: Option<Vec<String>>,
    agents: Option<Vec<String>>,
    capabilities: Option<Vec<Capability>>,
    /// Where `tools`, `agents` and `capabilities` were written, for the
    /// point check.
    tools_key: Option<Span>,
    agents_key: Option<Span>,
    capabilities_key: Option<Span>,
    order: Option<i32>,
    fail_closed: Option<()>,
    timeout_ms: Option<(u64, Span)>,
    unchecked_filters: Option<()>,
    krate: Option<Path>,
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &impl ToTokens, errors: &mut Errors) {
    if slot.is_some() {
        let name = key.to_token_stream().to_string();
        errors.spanned(
            key,
            format!("`{name}` is given twice: each argument may appear once"),
        );
    } else {
        *slot = Some(value);
    }
}

/// Parses the arguments of `#[on]`, `#[before_tool_call]` or
/// `#[after_tool_call]`, recording every error found.
pub(crate) fn hook_args(kind: HookKind, args: TokenStream, errors: &mut Errors) -> HookArgs {
    let mut pieces = split_at_commas(args);
    let point = match kind.fixed_point() {
        Some(point) => Some(point),
        None => take_point(&mut pieces, errors),
    };

    let mut slots = Slots::default();
    for piece in pieces {
        if piece.tokens.is_empty() {
            errors.at(piece.comma, "expected an argument before this comma");
            continue;
        }
        let parsed = Parser::parse2(
            |input: ParseStream<'_>| argument(kind, input, &mut slots, errors),
            piece.tokens,
        );
        if let Err(error) = parsed {
            errors.push(error);
        }
    }

    if let Some(point) = point {
        if let Some(span) = slots.tools_key.filter(|_| !point.takes_tools()) {
            errors.at(
                span,
                format!(
                    "`tools = [...]` applies only at PRE_TOOL_CALL and POST_TOOL_CALL, not at {}: \
                     only tool calls have a tool",
                    point.name()
                ),
            );
        }
        // Only a tool call has a tool whose capabilities a filter reads.
        if let Some(span) = slots.capabilities_key.filter(|_| !point.takes_tools()) {
            errors.at(
                span,
                format!(
                    "`capabilities = [...]` applies only at PRE_TOOL_CALL and POST_TOOL_CALL, not at {}: \
                     only tool calls have a tool to declare capabilities",
                    point.name()
                ),
            );
        }
        if let Some(span) = slots.agents_key.filter(|_| !point.takes_agents()) {
            errors.at(
                span,
                format!(
                    "`agents = [...]` applies only at the step, model-call and tool-call points \
                     (PRE_STEP, POST_STEP, PRE_MODEL_CALL, POST_MODEL_CALL, PRE_TOOL_CALL, POST_TOOL_CALL), \
                     not at {}: it has no agent",
                    point.name()
                ),
            );
        }
    }

    HookArgs {
        kind,
        point,
        tools: slots.tools.unwrap_or_default(),
        agents: slots.agents.unwrap_or_default(),
        capabilities: slots.capabilities.unwrap_or_default(),
        order: slots.order.unwrap_or(0),
        fail_closed: slots.fail_closed.is_some(),
        timeout_ms: slots.timeout_ms.filter(|(millis, _)| *millis > 0),
        unchecked_filters: slots.unchecked_filters.is_some(),
        krate: slots.krate,
    }
}

impl HookArgs {
    /// Checks that a `timeout_ms` is given to an `async fn` hook only: a
    /// synchronous hook runs inline and cannot be cut short, so the
    /// argument would do nothing there.
    pub(crate) fn check_timeout(&self, is_async: bool, errors: &mut Errors) {
        if let (Some((_, key)), false) = (self.timeout_ms, is_async) {
            errors.at(
                key,
                "`timeout_ms` applies to `async fn` hooks only: a synchronous hook runs inline and \
                 cannot be cut short; make the hook `async fn`, or remove the argument",
            );
        }
    }
}

/// Parses `#[crew_base]`'s arguments: only `crate = path`.
pub(crate) fn crew_base_args(args: TokenStream, errors: &mut Errors) -> Option<Path> {
    let mut krate = None;
    for piece in split_at_commas(args) {
        if piece.tokens.is_empty() {
            errors.at(piece.comma, "expected an argument before this comma");
            continue;
        }
        let parsed = Parser::parse2(
            |input: ParseStream<'_>| {
                let lookahead = input.lookahead1();
                if lookahead.peek(Token![crate]) {
                    let key: Token![crate] = input.parse()?;
                    input.parse::<Token![=]>()?;
                    let path = input.call(Path::parse_mod_style)?;
                    set_once(&mut krate, path, &key, errors);
                    Ok(())
                } else if input.peek(Ident::peek_any) {
                    let ident = input.call(Ident::parse_any)?;
                    errors.spanned(
                        &ident,
                        format!(
                            "unknown argument `{ident}`: `#[crew_base]` accepts only `crate = path`"
                        ),
                    );
                    input.parse::<TokenStream>().map(drop)
                } else {
                    Err(lookahead.error())
                }
            },
            piece.tokens,
        );
        if let Err(error) = parsed {
            errors.push(error);
        }
    }
    krate
}

/// One comma-separated piece of an argument list.
struct Piece {
    tokens: TokenStream,
    /// The comma after the piece (or the call site for the last one), for
    /// the error on an empty piece.
    comma: Span,
}

fn split_at_commas(args: TokenStream) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut current = TokenStream::new();
    for tree in args {
        match &tree {
            TokenTree::Punct(punct) if punct.as_char() == ',' => {
                pieces.push(Piece {
                    tokens: std::mem::take(&mut current),
                    comma: punct.span(),
                });
            }
            _ => current.extend([tree]),
        }
    }
    // A trailing comma leaves an empty last piece: that is fine.
    if !current.is_empty() {
        pieces.push(Piece {
            tokens: current,
            comma: Span::call_site(),
        });
    }
    pieces
}

fn starts_like_named_argument(tokens: &TokenStream) -> bool {
    match tokens.clone().into_iter().next() {
        Some(TokenTree::Ident(ident)) => [
            "tools",
            "agents",
            "capabilities",
            "order",
            "fail_closed",
            "timeout_ms",
            "unchecked_filters",
            "crate",
        ]
        .iter()
        .any(|name| ident == name),
        _ => false,
    }
}

/// Takes `#[on]`'s first piece as its interception point. A first piece
/// that is a named argument is left in place (and checked as one).
fn take_point(pieces: &mut Vec<Piece>, errors: &mut Errors) -> Option<Point> {
    match pieces.first() {
        None => {
            errors.at(
                Span::call_site(),
                format!("`#[on]` needs an interception point, like `#[on(PRE_TOOL_CALL)]`; the points: {POINT_NAMES}"),
            );
            None
        }
        Some(first) if starts_like_named_argument(&first.tokens) => {
            errors.spanned(
                &first.tokens,
                "`#[on]` takes the interception point first: `#[on(PRE_TOOL_CALL, ...)]`",
            );
            None
        }
        Some(_) => parse_point(pieces.remove(0), errors),
    }
}

fn parse_point(piece: Piece, errors: &mut Errors) -> Option<Point> {
    if piece.tokens.is_empty() {
        errors.at(
            piece.comma,
            format!("expected an interception point before this comma, one of {POINT_NAMES}"),
        );
        return None;
    }
    let path = match Parser::parse2(Path::parse_mod_style, piece.tokens) {
        Ok(path) => path,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    let last = path
        .segments
        .last()
        .map(|segment| segment.ident.to_string());
    match last.as_deref().and_then(Point::from_name) {
        Some(point) => Some(point),
        None => {
            let written = path.to_token_stream().to_string().replace(' ', "");
            errors.spanned(
                &path,
                format!(
                    "unknown interception point `{written}`: expected one of {POINT_NAMES} \
                     (also written `InterceptionPoint::PRE_TOOL_CALL`)"
                ),
            );
            None
        }
    }
}

/// Parses one `key = value` (or `fail_closed`) argument into `slots`.
fn argument(
    kind: HookKind,
    input: ParseStream<'_>,
    slots: &mut Slots,
    errors: &mut Errors,
) -> syn::Result<()> {
    let lookahead = input.lookahead1();
    if lookahead.peek(kw::tools) {
        let key: kw::tools = input.parse()?;
        slots.tools_key.get_or_insert(key.span);
        input.parse::<Token![=]>()?;
        let mut tools = Vec::new();
        for literal in string_list(input, "tools", "web_search", errors)? {
            let normalized = normalize_tool_name(&literal.value());
            if normalized.is_empty() {
                errors.spanned(
                    &literal,
                    format!(
                        "tool name {:?} normalizes to an empty name: a tool name needs at least one letter or digit",
                        literal.value()
                    ),
                );
            } else if !tools.contains(&normalized) {
                tools.push(normalized);
            }
        }
        set_once(&mut slots.tools, tools, &key, errors);
    } else if lookahead.peek(kw::agents) {
        let key: kw::agents = input.parse()?;
        slots.agents_key.get_or_insert(key.span);
        input.parse::<Token![=]>()?;
        let mut agents = Vec::new();
        for literal in string_list(input, "agents", "Researcher", errors)? {
            let role = literal.value();
            if role.is_empty() {
                errors.spanned(&literal, "an empty agent role matches no agent");
            } else if !agents.contains(&role) {
                agents.push(role);
            }
        }
        set_once(&mut slots.agents, agents, &key, errors);
    } else if lookahead.peek(kw::capabilities) {
        let key: kw::capabilities = input.parse()?;
        slots.capabilities_key.get_or_insert(key.span);
        input.parse::<Token![=]>()?;
        let capabilities = capability_list(input, errors)?;
        set_once(&mut slots.capabilities, capabilities, &key, errors);
    } else if lookahead.peek(kw::order) {
        let key: kw::order = input.parse()?;
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        let order = order_value(&value).unwrap_or_else(|| {
            errors.spanned(
                &value,
                "`order` takes an integer literal that fits in an `i32`, like `order = 10` or `order = -5`",
            );
            // Still counts as given, for the "given twice" check.
            0
        });
        set_once(&mut slots.order, order, &key, errors);
    } else if lookahead.peek(kw::timeout_ms) {
        let key: kw::timeout_ms = input.parse()?;
        input.parse::<Token![=]>()?;
        let value: Expr = input.parse()?;
        let millis = timeout_value(&value).unwrap_or_else(|| {
            errors.spanned(
                &value,
                "`timeout_ms` takes a positive integer literal of milliseconds, like `timeout_ms = 5000`",
            );
            // Still counts as given, for the "given twice" check; 0 is
            // dropped once the arguments are read.
            0
        });
        set_once(&mut slots.timeout_ms, (millis, key.span), &key, errors);
    } else if lookahead.peek(kw::fail_closed) {
        let key: kw::fail_closed = input.parse()?;
        set_once(&mut slots.fail_closed, (), &key, errors);
    } else if lookahead.peek(kw::unchecked_filters) {
        let key: kw::unchecked_filters = input.parse()?;
        set_once(&mut slots.unchecked_filters, (), &key, errors);
    } else if lookahead.peek(Token![crate]) {
        let key: Token![crate] = input.parse()?;
        input.parse::<Token![=]>()?;
        let path = input.call(Path::parse_mod_style)?;
        set_once(&mut slots.krate, path, &key, errors);
    } else if input.peek(Ident::peek_any) {
        let ident = input.call(Ident::parse_any)?;
        let attribute = kind.attribute();
        let message = if Point::from_name(&ident.to_string()).is_some() {
            match kind.fixed_point() {
                None => "`#[on]` takes one interception point, as its first argument".to_owned(),
                Some(point) => format!(
                    "`#[{attribute}]` always runs at {}: it takes no interception point",
                    point.name()
                ),
            }
        } else {
            format!(
                "unknown argument `{ident}`: `#[{attribute}]` accepts `tools = [...]`, `agents = [...]`, \
                 `capabilities = [...]`, `order = N`, `fail_closed`, `timeout_ms = N`, `unchecked_filters` and `crate = path`"
            )
        };
        errors.spanned(&ident, message);
        // The rest of the piece belongs to the unknown argument.
        input.parse::<TokenStream>()?;
    } else {
        return Err(lookahead.error());
    }
    Ok(())
}

/// Parses `[ "a", "b" ]`, recording an error on each entry that is not a
/// string literal.
fn string_list(
    input: ParseStream<'_>,
    key: &str,
    example: &str,
    errors: &mut Errors,
) -> syn::Result<Vec<LitStr>> {
    if !input.peek(token::Bracket) {
        return Err(input.error(format!(
            "`{key}` takes a list of string literals, like `{key} = [\"{example}\"]`"
        )));
    }
    let content;
    bracketed!(content in input);
    let entries = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
    let mut literals = Vec::new();
    for entry in entries {
        match entry {
            Expr::Lit(ExprLit {
                lit: Lit::Str(literal),
                attrs,
            }) if attrs.is_empty() => literals.push(literal),
            other => errors.spanned(
                &other,
                format!(
                    "`{key}` entries are string literals, like `{key} = [\"{example}\"]`: \
                     filters are read at compile time"
                ),
            ),
        }
    }
    Ok(literals)
}

/// Every capability's name, for messages.
fn capability_names() -> String {
    Capability::ALL.map(Capability::name).join(", ")
}

/// Parses `[ destructive, open_world ]`: bare capability names, at least
/// one, recording an error on each entry that is not one.
fn capability_list(input: ParseStream<'_>, errors: &mut Errors) -> syn::Result<Vec<Capability>> {
    if !input.peek(token::Bracket) {
        return Err(input.error(format!(
            "`capabilities` takes a list of capability names, like `capabilities = [destructive]`; \
             the capabilities: {}",
            capability_names()
        )));
    }
    let content;
    let brackets = bracketed!(content in input);
    let entries = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
    if entries.is_empty() {
        // `tools = []` means "no filter"; a capability filter that names
        // nothing is more likely a mistake than a wish for none.
        errors.at(
            brackets.span.join(),
            format!(
                "`capabilities = []` names no capability: list at least one of {}, \
                 or leave the argument out to run for every tool",
                capability_names()
            ),
        );
    }
    let mut capabilities = Vec::new();
    for entry in entries {
        if let Some(capability) = capability(&entry, errors)
            && !capabilities.contains(&capability)
        {
            capabilities.push(capability);
        }
    }
    Ok(capabilities)
}

/// The capability one entry names, or an error on it.
fn capability(entry: &Expr, errors: &mut Errors) -> Option<Capability> {
    match entry {
        Expr::Path(path) if path.attrs.is_empty() && path.qself.is_none() => {
            let Some(ident) = path.path.get_ident() else {
                // `Capability::Destructive`: the attribute reads names only.
                let bare = path
                    .path
                    .segments
                    .last()
                    .and_then(|last| suggest_capability(&last.ident.unraw().to_string()))
                    .unwrap_or("destructive");
                errors.spanned(
                    path,
                    format!(
                        "`capabilities` entries are bare capability names: write `{bare}`; \
                         the capabilities are {}",
                        capability_names()
                    ),
                );
                return None;
            };
            let name = ident.unraw().to_string();
            let found = Capability::from_name(&name);
            if found.is_none() {
                let known = capability_names();
                let message = match suggest_capability(&name) {
                    Some(meant) => format!(
                        "unknown capability `{name}`: did you mean `{meant}`? The capabilities are {known}"
                    ),
                    None => format!("unknown capability `{name}`: the capabilities are {known}"),
                };
                errors.spanned(ident, message);
            }
            found
        }
        Expr::Lit(ExprLit {
            lit: Lit::Str(literal),
            ..
        }) => {
            let written = literal.value();
            let bare = Capability::from_name(&written)
                .or_else(|| suggest_capability(&written).and_then(Capability::from_name))
                .map_or("destructive", Capability::name);
            errors.spanned(
                literal,
                format!(
                    "`capabilities` entries are names, not strings: write `{bare}` without quotes \
                     (the capabilities: {})",
                    capability_names()
                ),
            );
            None
        }
        other => {
            errors.spanned(
                other,
                format!(
                    "`capabilities` entries are bare capability names, like `destructive`: one of {}",
                    capability_names()
                ),
            );
            None
        }
    }
}

/// The capability name closest to `written` (`ReadOnly`, `read-only`,
/// `destrutive`), if one is close enough to be what was meant.
fn suggest_capability(written: &str) -> Option<&'static str> {
    let folded = normalize_tool_name(written);
    if let Some(capability) = Capability::from_name(&folded) {
        return Some(capability.name());
    }
    Capability::ALL
        .into_iter()
        .map(|capability| {
            (
                strsim::damerau_levenshtein(&folded, capability.name()),
                capability.name(),
            )
        })
        .filter(|(distance, name)| *distance <= (name.len() / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// The value of a `timeout_ms = N` literal: a positive integer that fits
/// in a `u64`.
fn timeout_value(value: &Expr) -> Option<u64> {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(literal),
            ..
        }) if matches!(literal.suffix(), "" | "u64") => literal
            .base10_parse::<u64>()
            .ok()
            .filter(|millis| *millis > 0),
        _ => None,
    }
}

/// The value of an `order = N` literal, negative ones included.
fn order_value(value: &Expr) -> Option<i32> {
    let (negative, literal) = match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(literal),
            ..
        }) => (false, literal),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit {
                lit: Lit::Int(literal),
                ..
            }) => (true, literal),
            _ => return None,
        },
        _ => return None,
    };
    if !matches!(literal.suffix(), "" | "i32") {
        return None;
    }
    let magnitude: i64 = literal.base10_parse().ok()?;
    i32::try_from(if negative { -magnitude } else { magnitude }).ok()
}
