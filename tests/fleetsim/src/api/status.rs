//! The apiserver's errors, as `metav1.Status` bodies with the codes,
//! reasons and messages of `k8s.io/apimachinery/pkg/api/errors`
//! (`NewNotFound`, `NewAlreadyExists`, `NewConflict`, `NewForbidden`,
//! `NewTooManyRequests`, `NewBadRequest`, `NewInvalid`, `NewMethodNotSupported`)
//! and the authorizer's text (`apiserver/pkg/endpoints/handlers/
//! responsewriters/errors.go`, `forbiddenMessage`). kubectl prints them as
//! `Error from server (<Reason>): <message>`.

use serde_json::{Value, json};

/// The group and resource an error is about (`""` and `pods`,
/// `apps` and `daemonsets`).
#[derive(Debug, Clone, Copy)]
pub struct Gr<'a> {
    pub group: &'a str,
    pub resource: &'a str,
}

impl Gr<'_> {
    /// `schema.GroupResource.String()`: `pods`, `daemonsets.apps`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// A failure: its HTTP code and its Status body.
#[derive(Debug, Clone)]
pub struct Failure {
    pub code: u16,
    pub body: Value,
}

fn status(code: u16, reason: &str, message: String, details: Option<Value>) -> Failure {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    });
    if !reason.is_empty() {
        body["reason"] = json!(reason);
    }
    if let Some(d) = details {
        body["details"] = d;
    }
    body["code"] = json!(code);
    Failure { code, body }
}

fn details(gr: Gr, name: &str) -> Value {
    let mut d = json!({});
    if !name.is_empty() {
        d["name"] = json!(name);
    }
    if !gr.group.is_empty() {
        d["group"] = json!(gr.group);
    }
    d["kind"] = json!(gr.resource);
    d
}

pub fn not_found(gr: Gr, name: &str) -> Failure {
    status(
        404,
        "NotFound",
        format!("{} \"{name}\" not found", gr.qualified()),
        Some(details(gr, name)),
    )
}

/// A path the server does not serve at all.
pub fn path_not_found() -> Failure {
    status(
        404,
        "NotFound",
        "the server could not find the requested resource".into(),
        Some(json!({})),
    )
}

pub fn already_exists(gr: Gr, name: &str) -> Failure {
    status(
        409,
        "AlreadyExists",
        format!("{} \"{name}\" already exists", gr.qualified()),
        Some(details(gr, name)),
    )
}

/// `NewConflict(qualifiedResource, name, err)`.
pub fn conflict(gr: Gr, name: &str, why: &str) -> Failure {
    status(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            gr.qualified()
        ),
        Some(details(gr, name)),
    )
}

/// The storage's optimistic-concurrency refusal (`storage.OptimisticLockErrorMsg`).
pub const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// `NewForbidden`: `<resource> "<name>" is forbidden: <why>`.
pub fn forbidden(gr: Gr, name: &str, why: &str) -> Failure {
    let message = if gr.resource.is_empty() {
        format!("forbidden: {why}")
    } else if name.is_empty() {
        format!("{} is forbidden: {why}", gr.qualified())
    } else {
        format!("{} \"{name}\" is forbidden: {why}", gr.qualified())
    };
    status(403, "Forbidden", message, Some(details(gr, name)))
}

/// A validating admission webhook's refusal with code 403, as the
/// apiserver turns it into a Status: "admission webhook %q denied the
/// request: %s" (apiserver/pkg/admission/plugin/webhook/errors,
/// `ToStatusErr`).
pub fn webhook_denied(webhook: &str, why: &str) -> Failure {
    status(
        403,
        "Forbidden",
        format!("admission webhook \"{webhook}\" denied the request: {why}"),
        None,
    )
}

pub fn too_many_requests(message: &str, retry_after: u64, causes: Vec<Value>) -> Failure {
    let mut d = json!({"causes": causes});
    if retry_after > 0 {
        d["retryAfterSeconds"] = json!(retry_after);
    }
    status(429, "TooManyRequests", message.to_string(), Some(d))
}

pub fn bad_request(message: &str) -> Failure {
    status(400, "BadRequest", message.to_string(), None)
}

/// 422 Invalid: what the sim refuses to store because it does not model it
/// (said so, rather than accepted and forgotten).
/// `why` is `<field>: <message>`, one `field.Error`, which kubectl prints
/// from the cause (`The <kind> "<name>" is invalid: <field>: <message>`).
pub fn invalid(gr: Gr, kind: &str, name: &str, why: &str) -> Failure {
    let (field, message) = why.split_once(": ").unwrap_or(("", why));
    let mut d = details(gr, name);
    d["kind"] = json!(kind);
    d["causes"] = json!([{"reason": "FieldValueInvalid", "message": message, "field": field}]);
    status(
        422,
        "Invalid",
        format!("{kind} \"{name}\" is invalid: {why}"),
        Some(d),
    )
}

pub fn method_not_supported(gr: Gr, action: &str) -> Failure {
    status(
        405,
        "MethodNotAllowed",
        format!(
            "{action} is not supported on resources of kind {:?}",
            gr.qualified()
        ),
        Some(details(gr, "")),
    )
}

pub fn unsupported_media_type(content_type: &str) -> Failure {
    status(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {content_type})"
        ),
        None,
    )
}

pub fn unauthorized() -> Failure {
    status(401, "Unauthorized", "Unauthorized".into(), None)
}

pub fn internal(message: &str) -> Failure {
    status(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
        None,
    )
}

/// `metav1.Status` Success, as a delete of an object without a body or an
/// eviction answers.
pub fn success(details: Option<Value>) -> Value {
    let mut body =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if let Some(d) = details {
        body["details"] = d;
    }
    body
}

/// A Status as Go's encoder writes it: the struct's field order (`kind`,
/// `apiVersion`, `metadata`, `status`, `message`, `reason`, `details`
/// {`name`, `group`, `kind`, `uid`, `causes`, `retryAfterSeconds`}, `code`)
/// and a newline. `kubectl get|delete --raw` copy it byte for byte.
pub fn go_order(v: &Value) -> Option<String> {
    if v["kind"] != "Status" {
        return None;
    }
    fn fields(v: &Value, order: &[&str]) -> String {
        let parts: Vec<String> = order
            .iter()
            .filter(|k| !v[**k].is_null())
            .map(|k| {
                let inner = if *k == "details" {
                    format!(
                        "{{{}}}",
                        fields(
                            &v[*k],
                            &[
                                "name",
                                "group",
                                "kind",
                                "uid",
                                "causes",
                                "retryAfterSeconds"
                            ]
                        )
                    )
                } else {
                    v[*k].to_string()
                };
                format!("{}:{inner}", Value::String((*k).to_string()))
            })
            .collect();
        parts.join(",")
    }
    let order = [
        "kind",
        "apiVersion",
        "metadata",
        "status",
        "message",
        "reason",
        "details",
        "code",
    ];
    Some(format!("{{{}}}\n", fields(v, &order)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_written_in_gos_field_order() {
        let s = success(Some(
            json!({"uid": "u", "kind": "configmaps", "name": "dl"}),
        ));
        assert_eq!(
            go_order(&s).unwrap(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\
             \"details\":{\"name\":\"dl\",\"kind\":\"configmaps\",\"uid\":\"u\"}}\n"
        );
        assert_eq!(go_order(&json!({"kind": "Node"})), None);
    }
}
