//! kubectl's `-o jsonpath=TEMPLATE`, as far as the templates fleetctl and an
//! operator use need it: literal text, quoted strings (`{"\t"}`), field
//! paths with backslash-escaped dots (`{.metadata.annotations.a\.b/c}`),
//! `[*]` and `[N]`, and `{range …}{end}`. Anything else in a template (filters,
//! unions, slices, `..`, functions) is refused, so the sim never prints
//! something the real kubectl would not.
//!
//! What it prints follows client-go's `util/jsonpath`: a string as is; a
//! map, list or struct as compact JSON (`json.Marshal`: keys sorted, `<`,
//! `>`, `&` escaped), since kubectl 1.19 (kubernetes/kubernetes#89660);
//! several results of one expression separated by a space; and, because
//! kubectl passes `--allow-missing-template-keys=true` by default, nothing
//! for a missing field. No newline is added at the end.

use serde_json::Value;

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    All,
    Index(usize),
}

/// A template that parsed: apply it with [`Template::render`].
#[derive(Debug, Clone, PartialEq)]
pub struct Template(Vec<Node>, String);

impl Template {
    /// Parses `text` (what follows `jsonpath=`); `Err` names what the sim
    /// does not emulate.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut tokens = tokenize(text)?.into_iter();
        let nodes = parse_nodes(&mut tokens, false)?;
        Ok(Template(nodes, text.to_string()))
    }

    /// What kubectl prints; `Err` with what it complains when an index is
    /// past the end of a list: client-go's `evalArray` fails
    /// (`array index out of bounds: index I, length N`) where a missing
    /// field would print nothing, and kubectl's printer wraps it.
    pub fn render(&self, doc: &Value) -> Result<String, String> {
        let mut out = String::new();
        render(&self.0, doc, &mut out).map_err(|e| {
            format!(
                "error executing jsonpath {:?}: Error executing template: {e}. Printing more \
                 information for debugging the template:",
                self.1
            )
        })?;
        Ok(out)
    }
}

enum Token {
    Text(String),
    Expr(String),
}

/// Splits literal text from `{…}` expressions. A `}` inside a quoted string
/// does not close the expression.
fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    let mut literal = String::new();
    while let Some(c) = chars.next() {
        if c != '{' {
            literal.push(c);
            continue;
        }
        if !literal.is_empty() {
            tokens.push(Token::Text(std::mem::take(&mut literal)));
        }
        let mut expr = String::new();
        let mut quoted = false;
        let mut closed = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' => {
                    expr.push(c);
                    if let Some(n) = chars.next() {
                        expr.push(n);
                    }
                }
                '"' => {
                    quoted = !quoted;
                    expr.push(c);
                }
                '}' if !quoted => {
                    closed = true;
                    break;
                }
                _ => expr.push(c),
            }
        }
        if !closed {
            return Err(format!("unclosed action in {text:?}"));
        }
        tokens.push(Token::Expr(expr.trim().to_string()));
    }
    if !literal.is_empty() {
        tokens.push(Token::Text(literal));
    }
    Ok(tokens)
}

fn parse_nodes(
    tokens: &mut impl Iterator<Item = Token>,
    in_range: bool,
) -> Result<Vec<Node>, String> {
    let mut nodes = Vec::new();
    while let Some(t) = tokens.next() {
        match t {
            Token::Text(s) => nodes.push(Node::Text(s)),
            Token::Expr(e) if e == "end" => {
                if in_range {
                    return Ok(nodes);
                }
                return Err("{end} without {range}".into());
            }
            Token::Expr(e) => {
                if let Some(path) = e.strip_prefix("range ") {
                    let steps = parse_path(path.trim())?;
                    let body = parse_nodes(tokens, true)?;
                    nodes.push(Node::Range(steps, body));
                } else if e.starts_with('"') {
                    nodes.push(Node::Text(unquote(&e)?));
                } else {
                    nodes.push(Node::Path(parse_path(&e)?));
                }
            }
        }
    }
    if in_range {
        return Err("{range} without {end}".into());
    }
    Ok(nodes)
}

/// A Go string literal's content (`strconv.Unquote`), for the escapes
/// templates use.
fn unquote(s: &str) -> Result<String, String> {
    let inner = s
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .ok_or_else(|| format!("not a quoted string: {s}"))?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            other => return Err(format!("escape \\{} in {s}", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}

/// `.a.b[*].c\.d` (a leading `@` or `$` is the same root here).
fn parse_path(text: &str) -> Result<Vec<Step>, String> {
    let text = text
        .strip_prefix('@')
        .or_else(|| text.strip_prefix('$'))
        .unwrap_or(text);
    if !text.starts_with('.') && !text.starts_with('[') {
        return Err(format!("not a field path: {text}"));
    }
    let mut steps = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                if chars.peek() == Some(&'.') {
                    return Err("recursive descent (..)".into());
                }
                let mut name = String::new();
                while let Some(&n) = chars.peek() {
                    if n == '.' || n == '[' {
                        break;
                    }
                    chars.next();
                    if n == '\\' {
                        match chars.next() {
                            Some(e) => name.push(e),
                            None => return Err("a trailing backslash".into()),
                        }
                    } else if " ,{}$@()?*=<>!|&\"'".contains(n) {
                        return Err(format!("`{n}` in a field name"));
                    } else {
                        name.push(n);
                    }
                }
                if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                let mut inner = String::new();
                for n in chars.by_ref() {
                    if n == ']' {
                        break;
                    }
                    inner.push(n);
                }
                match inner.as_str() {
                    "*" => steps.push(Step::All),
                    i => match i.parse::<usize>() {
                        Ok(i) => steps.push(Step::Index(i)),
                        Err(_) => return Err(format!("[{i}]")),
                    },
                }
            }
            other => return Err(format!("`{other}` in a path")),
        }
    }
    Ok(steps)
}

/// Every value `steps` reaches from `doc`; a missing field reaches none,
/// an index past the end of a list is an error.
fn eval<'a>(steps: &[Step], doc: &'a Value) -> Result<Vec<&'a Value>, String> {
    let mut current = vec![doc];
    for step in steps {
        let mut next = Vec::new();
        for v in current {
            match (step, v) {
                (Step::Field(f), Value::Object(m)) => next.extend(m.get(f)),
                (Step::All, Value::Array(a)) => next.extend(a.iter()),
                (Step::All, Value::Object(m)) => next.extend(m.values()),
                (Step::Index(i), Value::Array(a)) => match a.get(*i) {
                    Some(item) => next.push(item),
                    None => {
                        return Err(format!(
                            "array index out of bounds: index {i}, length {}",
                            a.len()
                        ));
                    }
                },
                _ => {}
            }
        }
        current = next;
    }
    Ok(current)
}

fn render(nodes: &[Node], doc: &Value, out: &mut String) -> Result<(), String> {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Path(steps) => {
                let texts: Vec<String> = eval(steps, doc)?.into_iter().map(text_of).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(steps, body) => {
                for v in eval(steps, doc)? {
                    render(body, v, out)?;
                }
            }
        }
    }
    Ok(())
}

/// One result as client-go prints it.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(_) | Value::Array(_) => go_json(v),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `json.Marshal` of an unstructured value: compact, keys sorted (serde's
/// map is ordered), and Go's HTML-safe escapes, which serde does not do.
pub fn go_json(v: &Value) -> String {
    let text = serde_json::to_string(v).unwrap_or_default();
    // These characters only occur inside strings in JSON text.
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(t: &str, doc: &Value) -> String {
        Template::parse(t).unwrap().render(doc).unwrap()
    }

    #[test]
    fn an_index_past_the_end_fails_and_a_missing_list_prints_nothing() {
        let doc = json!({"c": [{"command": ["/usr/bin/kured", "-x"]}, {"image": "i"}]});
        assert_eq!(
            render(r#"{.c[0].command[0]}|{.c[1].command[0]}"#, &doc),
            "/usr/bin/kured|"
        );
        let err = Template::parse("{.c[2].image}")
            .unwrap()
            .render(&doc)
            .unwrap_err();
        assert_eq!(
            err,
            "error executing jsonpath \"{.c[2].image}\": Error executing template: array index out \
             of bounds: index 2, length 2. Printing more information for debugging the template:"
        );
    }

    #[test]
    fn ranges_fields_and_literals() {
        let doc = json!({"items": [
            {"metadata": {"namespace": "kube-system", "name": "kured"},
             "spec": {"containers": [{"name": "kured", "command": ["/usr/bin/kured"], "env": [{"name": "A", "value": "<&>"}]}]}},
            {"metadata": {"namespace": "x", "name": "y"}, "spec": {"containers": []}},
        ]});
        let t = r#"{range .items[*]}ds{"\t"}{.metadata.namespace}{"\t"}{.metadata.name}{"\n"}{range .spec.containers[*]}c{"\t"}{.name}{"\t"}{.command}{"\t"}{.args}{"\t"}{.env}{"\n"}{end}{end}"#;
        assert_eq!(
            render(t, &doc),
            "ds\tkube-system\tkured\nc\tkured\t[\"/usr/bin/kured\"]\t\t[{\"name\":\"A\",\"value\":\"\\u003c\\u0026\\u003e\"}]\nds\tx\ty\n"
        );
    }

    #[test]
    fn escaped_dots_name_one_key_and_missing_keys_print_nothing() {
        let doc = json!({"metadata": {"resourceVersion": "41", "annotations": {"weave.works/kured-node-lock": "{\"nodeID\":\"w-1\"}"}}});
        let t = r#"{.metadata.resourceVersion}{"\t"}{.metadata.annotations.weave\.works/kured-node-lock}"#;
        assert_eq!(render(t, &doc), "41\t{\"nodeID\":\"w-1\"}");
        let bare = json!({"metadata": {"resourceVersion": "7"}});
        assert_eq!(render(t, &bare), "7\t");
        assert_eq!(
            render("{.data}", &json!({"data": {"b": "2", "a": "1"}})),
            r#"{"a":"1","b":"2"}"#
        );
        assert_eq!(
            render("{.items[*].n}", &json!({"items": [{"n": "a"}, {"n": 2}]})),
            "a 2"
        );
    }

    #[test]
    fn refuses_what_it_does_not_emulate() {
        for t in [
            "{.items[?(@.a==1)]}",
            "{..name}",
            "{range .items[*]}",
            "{end}",
            "{.a",
            "{.items[1:2]}",
        ] {
            assert!(Template::parse(t).is_err(), "{t}");
        }
    }
}
