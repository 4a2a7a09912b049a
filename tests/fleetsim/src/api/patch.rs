//! The three patch types kubectl sends (`k8s.io/apimachinery/pkg/types`
//! `PatchType`): JSON merge patch (RFC 7386, `kubectl annotate`, `label`,
//! `patch --type=merge`), JSON patch (RFC 6902, `patch --type=json`) and
//! strategic merge patch (`cordon`, `drain`, `patch` by default). A
//! strategic merge patch differs from a merge patch only in lists whose
//! schema names a merge key and in its `$` directives; the fields the sim
//! stores (`spec.unschedulable`, annotations, labels, ConfigMap data) hold
//! no such list, so it is applied as a merge patch and a directive is
//! refused rather than misapplied.

use serde_json::{Map, Value};

/// RFC 7386.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// The first `$` directive in a strategic merge patch, if any.
pub fn directive(patch: &Value) -> Option<String> {
    match patch {
        Value::Object(m) => m.iter().find_map(|(k, v)| {
            if k.starts_with('$') {
                Some(k.clone())
            } else {
                directive(v)
            }
        }),
        Value::Array(a) => a.iter().find_map(directive),
        _ => None,
    }
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// The parent container of a JSON pointer's target and the last token.
fn parent<'a>(doc: &'a mut Value, pointer: &str) -> Result<(&'a mut Value, String), String> {
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer {pointer:?}"));
    };
    let mut tokens: Vec<String> = rest.split('/').map(unescape).collect();
    let last = tokens.pop().unwrap_or_default();
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(&t),
            Value::Array(a) => t.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| format!("doc is missing path: {pointer:?}"))?;
    }
    Ok((cur, last))
}

fn get<'a>(doc: &'a Value, pointer: &str) -> Option<&'a Value> {
    doc.pointer(pointer)
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (p, last) = parent(doc, path)?;
    match p {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .ok()
                    .filter(|i| *i <= a.len())
                    .ok_or_else(|| {
                        format!("add operation does not apply: index {last} out of bounds")
                    })?
            };
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (p, last) = parent(doc, path)?;
    let missing = || format!("remove operation does not apply: doc is missing path: {path:?}");
    match p {
        Value::Object(m) => m.remove(&last).ok_or_else(missing),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// RFC 6902, all six operations; an error names the failing operation as
/// evanphx/json-patch (the apiserver's library) does, closely enough.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let Value::Array(ops) = ops else {
        return Err("json: cannot unmarshal object into Go value of type jsonpatch.Patch".into());
    };
    for op in ops {
        let name = op["op"].as_str().unwrap_or("");
        let path = op["path"].as_str().unwrap_or("");
        match name {
            "add" => add(doc, path, op["value"].clone())?,
            "remove" => {
                remove(doc, path)?;
            }
            "replace" => {
                if get(doc, path).is_none() {
                    return Err(format!(
                        "replace operation does not apply: doc is missing key: {path}"
                    ));
                }
                remove(doc, path)?;
                add(doc, path, op["value"].clone())?;
            }
            "test" => {
                if get(doc, path) != Some(&op["value"]) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            "move" | "copy" => {
                let from = op["from"].as_str().unwrap_or("");
                let v = if name == "move" {
                    remove(doc, from)?
                } else {
                    get(doc, from).cloned().ok_or_else(|| {
                        format!("copy operation does not apply: doc is missing from path: {from}")
                    })?
                };
                add(doc, path, v)?;
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_sets_and_removes() {
        let mut doc = json!({"spec": {"unschedulable": true, "podCIDR": "x"}, "metadata": {"annotations": {"a": "1"}}});
        merge(
            &mut doc,
            &json!({"spec": {"unschedulable": null}, "metadata": {"annotations": {"b": "2"}}}),
        );
        assert_eq!(
            doc,
            json!({"spec": {"podCIDR": "x"}, "metadata": {"annotations": {"a": "1", "b": "2"}}})
        );
    }

    #[test]
    fn json_patch_applies_every_operation_or_fails() {
        let mut doc = json!({"metadata": {"annotations": {"a/b": "1"}}, "list": [1, 2]});
        json_patch(
            &mut doc,
            &json!([
                {"op": "test", "path": "/metadata/annotations/a~1b", "value": "1"},
                {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "2"},
                {"op": "add", "path": "/list/-", "value": 3},
                {"op": "remove", "path": "/list/0"},
                {"op": "copy", "from": "/list", "path": "/copy"},
            ]),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {"annotations": {"a/b": "2"}}, "list": [2, 3], "copy": [2, 3]})
        );
        let err = json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/list/0", "value": 9}]),
        )
        .unwrap_err();
        assert_eq!(err, "testing value /list/0 failed: test failed");
        assert!(json_patch(&mut doc, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }

    #[test]
    fn directives_are_found_anywhere() {
        assert_eq!(directive(&json!({"spec": {"unschedulable": true}})), None);
        assert_eq!(
            directive(&json!({"spec": {"taints": [{"$patch": "delete"}]}})),
            Some("$patch".into())
        );
    }
}
