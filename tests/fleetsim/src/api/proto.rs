//! Request bodies in Kubernetes' protobuf encoding. kubectl ≥ 1.32's typed
//! clients send them (`Content-Type: application/vnd.kubernetes.protobuf`:
//! `kubectl create configmap`, for one), so the sim decodes the kinds it
//! can store. The envelope is `k8s\0` then a `runtime.Unknown`
//! (`apimachinery/pkg/runtime/types_proto.go`, `generated.proto`: 1
//! typeMeta {1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4
//! contentType); `raw` is the object, field numbers from
//! `k8s.io/api/core/v1/generated.proto` (ConfigMap: 1 metadata, 2 data,
//! 3 binaryData, 4 immutable), `policy/v1` (Eviction: 1 metadata,
//! 2 deleteOptions) and `apimachinery/pkg/apis/meta/v1/generated.proto`
//! (ObjectMeta: 1 name, 2 generateName, 3 namespace, 5 uid,
//! 6 resourceVersion, 11 labels, 12 annotations; DeleteOptions: 1
//! gracePeriodSeconds, 2 preconditions {1 uid, 2 resourceVersion}, 3
//! orphanDependents, 4 propagationPolicy, 5 dryRun). Responses are JSON,
//! which every client accepts alongside protobuf.

use base64::Engine;
use serde_json::{Map, Value, json};

pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

/// The fields of one message, in order: (number, value).
fn fields(mut b: &[u8]) -> Result<Vec<(u64, Field<'_>)>, String> {
    let bad = || "malformed protobuf".to_string();
    let mut out = Vec::new();
    while !b.is_empty() {
        let (key, rest) = varint(b).ok_or_else(bad)?;
        let (num, wire) = (key >> 3, key & 7);
        b = rest;
        match wire {
            0 => {
                let (v, rest) = varint(b).ok_or_else(bad)?;
                out.push((num, Field::Varint(v)));
                b = rest;
            }
            2 => {
                let (len, rest) = varint(b).ok_or_else(bad)?;
                let len = usize::try_from(len).map_err(|_| bad())?;
                if rest.len() < len {
                    return Err(bad());
                }
                out.push((num, Field::Bytes(&rest[..len])));
                b = &rest[len..];
            }
            1 if b.len() >= 8 => b = &b[8..],
            5 if b.len() >= 4 => b = &b[4..],
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "protobuf string is not UTF-8".to_string())
}

/// A `map<string, string>` entry (1 key, 2 value); `binary` base64s the value.
fn entry(b: &[u8], binary: bool) -> Result<(String, Value), String> {
    let (mut k, mut v) = (String::new(), Value::String(String::new()));
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(x)) => k = text(x)?,
            (2, Field::Bytes(x)) if binary => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(x))
            }
            (2, Field::Bytes(x)) => v = json!(text(x)?),
            _ => {}
        }
    }
    Ok((k, v))
}

fn object_meta(b: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    for (n, f) in fields(b)? {
        let Field::Bytes(x) = f else { continue };
        let key = match n {
            1 => "name",
            2 => "generateName",
            3 => "namespace",
            5 => "uid",
            6 => "resourceVersion",
            11 => {
                let (k, v) = entry(x, false)?;
                labels.insert(k, v);
                continue;
            }
            12 => {
                let (k, v) = entry(x, false)?;
                annotations.insert(k, v);
                continue;
            }
            _ => continue,
        };
        m.insert(key.into(), json!(text(x)?));
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(Value::Object(m))
}

fn delete_options(b: &[u8]) -> Result<Value, String> {
    let mut m = Map::new();
    let mut dry = Vec::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Varint(v)) => {
                m.insert("gracePeriodSeconds".into(), json!(v as i64));
            }
            (2, Field::Bytes(x)) => {
                let mut p = Map::new();
                for (n, f) in fields(x)? {
                    if let Field::Bytes(y) = f {
                        match n {
                            1 => p.insert("uid".into(), json!(text(y)?)),
                            2 => p.insert("resourceVersion".into(), json!(text(y)?)),
                            _ => None,
                        };
                    }
                }
                m.insert("preconditions".into(), Value::Object(p));
            }
            (3, Field::Varint(v)) => {
                m.insert("orphanDependents".into(), json!(v != 0));
            }
            (4, Field::Bytes(x)) => {
                m.insert("propagationPolicy".into(), json!(text(x)?));
            }
            (5, Field::Bytes(x)) => dry.push(json!(text(x)?)),
            _ => {}
        }
    }
    if !dry.is_empty() {
        m.insert("dryRun".into(), Value::Array(dry));
    }
    Ok(Value::Object(m))
}

/// The JSON of a protobuf body of a kind the sim stores; else why not.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let Some(unknown) = body.strip_prefix(MAGIC) else {
        return Err("protobuf body without the k8s envelope".into());
    };
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(unknown)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(x)) => api_version = text(x)?,
                        (2, Field::Bytes(x)) => kind = text(x)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    match kind.as_str() {
        "ConfigMap" => {
            let (mut data, mut binary) = (Map::new(), Map::new());
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(x)) => {
                        obj.insert("metadata".into(), object_meta(x)?);
                    }
                    (2, Field::Bytes(x)) => {
                        let (k, v) = entry(x, false)?;
                        data.insert(k, v);
                    }
                    (3, Field::Bytes(x)) => {
                        let (k, v) = entry(x, true)?;
                        binary.insert(k, v);
                    }
                    (4, Field::Varint(v)) => {
                        obj.insert("immutable".into(), json!(v != 0));
                    }
                    _ => {}
                }
            }
            if !data.is_empty() {
                obj.insert("data".into(), Value::Object(data));
            }
            if !binary.is_empty() {
                obj.insert("binaryData".into(), Value::Object(binary));
            }
        }
        "Eviction" => {
            for (n, f) in fields(raw)? {
                match (n, f) {
                    (1, Field::Bytes(x)) => {
                        obj.insert("metadata".into(), object_meta(x)?);
                    }
                    (2, Field::Bytes(x)) => {
                        obj.insert("deleteOptions".into(), delete_options(x)?);
                    }
                    _ => {}
                }
            }
        }
        "DeleteOptions" => return delete_options(raw),
        other => return Err(format!("fleetsim decodes no protobuf {other:?}: send JSON")),
    }
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len_field(num: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![(num << 3) | 2, body.len() as u8];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn decodes_a_configmap_as_kubectl_create_sends_it() {
        let meta = [len_field(1, b"lock"), len_field(3, b"default")].concat();
        let entry = [len_field(1, b"holder"), len_field(2, b"fleetctl")].concat();
        let cm = [len_field(1, &meta), len_field(2, &entry)].concat();
        let tm = [len_field(1, b"v1"), len_field(2, b"ConfigMap")].concat();
        let unknown = [len_field(1, &tm), len_field(2, &cm)].concat();
        let body = [MAGIC, &unknown].concat();
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "lock", "namespace": "default"}, "data": {"holder": "fleetctl"}})
        );
    }

    #[test]
    fn refuses_truncated_and_unknown_bodies() {
        assert!(decode(b"k8s\0\x0a\x05ab").is_err());
        assert!(decode(b"{}").is_err());
        let tm = [len_field(1, b"v1"), len_field(2, b"Secret")].concat();
        let body = [MAGIC, &len_field(1, &tm)].concat();
        assert!(decode(&body).unwrap_err().contains("Secret"));
    }
}
