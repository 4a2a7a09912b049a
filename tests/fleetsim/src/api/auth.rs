//! Authorization, as kubeadm's cluster configures it
//! (`--authorization-mode=Node,RBAC`, the NodeRestriction admission plugin):
//!
//! - the admin (`kubeadm:cluster-admins`, `system:masters`) may do anything,
//!   except what a scenario's fault takes away (`kured_lock_forbidden`:
//!   changing Kured's DaemonSet, as an RBAC policy would);
//! - a node (`system:node:<name>` in `system:nodes`) gets what the Node
//!   authorizer's static rules grant (`plugin/pkg/auth/authorizer/rbac/
//!   bootstrappolicy/policy.go`, `NodeRules`: nodes get/list/watch/create/
//!   update/patch, pods get/list/watch/create/delete, pods/status,
//!   pods/eviction create, leases), configmaps only through
//!   `authorizeReadNamespacedObject` (`plugin/pkg/auth/authorizer/node/
//!   node_authorizer.go`: read verbs only, "can only read resources of this
//!   type"; here no pod references a ConfigMap, so the only ones a node reads
//!   are those kubeadm's RBAC gives `system:nodes`: `kube-system/
//!   kubeadm-config` and `kubelet-config`); then NodeRestriction
//!   (`plugin/pkg/admission/noderestriction/admission.go`): a node changes
//!   only its own Node ("node %q is not allowed to modify node %q") and
//!   evicts only its own pods ("node %s can only evict pods with
//!   spec.nodeName set to itself");
//! - everyone authenticated reads discovery, `/version`, `/healthz`,
//!   `/readyz`, `/livez` (`system:discovery`, `system:public-info-viewer`);
//!   `/metrics` needs a rule neither nodes nor ordinary users have.
//!
//! A refusal is the authorizer's (`responsewriters.forbiddenMessage`):
//! `User "<user>" cannot <verb> resource "<resource>[/<sub>]" in API group
//! "<group>" in the namespace "<ns>"` (or `at the cluster scope`), then
//! `: <reason>` when the authorizer gave one.

use super::identity::User;
use super::status::{Failure, Gr, forbidden};

/// What a request asks to do, in the authorizer's terms.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

fn message(user: &User, a: &Attributes, reason: &str) -> String {
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let mut m = if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name, a.verb, resource, a.group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name, a.verb, resource, a.group, a.namespace
        )
    };
    if !reason.is_empty() {
        m.push_str(": ");
        m.push_str(reason);
    }
    m
}

/// The refusal of the authorizer chain, as a 403 Status.
pub fn refusal(user: &User, a: &Attributes, reason: &str) -> Failure {
    let gr = Gr {
        group: a.group,
        resource: a.resource,
    };
    forbidden(gr, a.name, &message(user, a, reason))
}

/// A non-resource path refused: `User "x" cannot get path "/metrics"`.
pub fn path_refusal(user: &User, verb: &str, path: &str) -> Failure {
    forbidden(
        Gr {
            group: "",
            resource: "",
        },
        "",
        &format!("User {:?} cannot {verb} path {path:?}", user.name),
    )
}

/// The Node authorizer's static rules: (group, resource incl. subresource, verbs).
const NODE_RULES: &[(&str, &str, &[&str])] = &[
    (
        "",
        "nodes",
        &["create", "get", "list", "watch", "update", "patch"],
    ),
    ("", "nodes/status", &["update", "patch"]),
    ("", "pods", &["get", "list", "watch", "create", "delete"]),
    ("", "pods/status", &["update", "patch"]),
    ("", "pods/eviction", &["create"]),
    ("", "events", &["create", "update", "patch"]),
    (
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update", "patch", "delete"],
    ),
];

/// ConfigMaps kubeadm lets every node read (`kubeadm:nodes-kubeadm-config`,
/// `kubeadm:kubelet-config` Roles bound to `system:nodes`).
const NODE_CONFIGMAPS: &[&str] = &["kubeadm-config", "kubelet-config"];

/// Whether the authorizers allow `a`; else the reason they gave.
pub fn authorize(user: &User, a: &Attributes, kured_lock_forbidden: bool) -> Result<(), String> {
    if user.is_admin() {
        let kured = a.group == "apps" && a.resource == "daemonsets";
        if kured_lock_forbidden && kured && matches!(a.verb, "update" | "patch") {
            return Err(String::new());
        }
        return Ok(());
    }
    if user.node().is_none() {
        return Err(String::new());
    }
    if a.group.is_empty() && a.resource == "configmaps" {
        if !matches!(a.verb, "get" | "list" | "watch") {
            return Err("can only read resources of this type".into());
        }
        if !a.subresource.is_empty() {
            return Err("cannot read subresource".into());
        }
        if a.name.is_empty() {
            return Err("No Object name found".into());
        }
        if a.namespace == "kube-system" && NODE_CONFIGMAPS.contains(&a.name) {
            return Ok(());
        }
        return Err(format!(
            "no relationship found between node '{}' and this object",
            user.node().unwrap_or_default()
        ));
    }
    let resource = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let allowed = NODE_RULES
        .iter()
        .any(|(g, r, verbs)| *g == a.group && *r == resource && verbs.contains(&a.verb));
    if allowed { Ok(()) } else { Err(String::new()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str) -> User {
        User {
            name: format!("system:node:{name}"),
            groups: vec!["system:nodes".into(), "system:authenticated".into()],
        }
    }

    fn attrs<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        ns: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            group,
            resource,
            subresource: "",
            namespace: ns,
            name,
        }
    }

    #[test]
    fn a_node_reads_nodes_and_pods_but_cannot_touch_daemonsets() {
        let w = node("w-1");
        assert!(authorize(&w, &attrs("list", "", "pods", "", ""), false).is_ok());
        assert!(authorize(&w, &attrs("patch", "", "nodes", "", "w-1"), false).is_ok());
        let a = attrs("patch", "apps", "daemonsets", "kube-system", "kured");
        let reason = authorize(&w, &a, false).unwrap_err();
        let f = refusal(&w, &a, &reason);
        assert_eq!(f.code, 403);
        assert_eq!(
            f.body["message"],
            "daemonsets.apps \"kured\" is forbidden: User \"system:node:w-1\" cannot patch resource \
             \"daemonsets\" in API group \"apps\" in the namespace \"kube-system\""
        );
    }

    #[test]
    fn a_node_reads_only_kubeadms_configmaps() {
        let w = node("w-1");
        assert!(
            authorize(
                &w,
                &attrs("get", "", "configmaps", "kube-system", "kubeadm-config"),
                false
            )
            .is_ok()
        );
        let a = attrs("delete", "", "configmaps", "default", "lock");
        let f = refusal(&w, &a, &authorize(&w, &a, false).unwrap_err());
        assert_eq!(
            f.body["message"],
            "configmaps \"lock\" is forbidden: User \"system:node:w-1\" cannot delete resource \
             \"configmaps\" in API group \"\" in the namespace \"default\": can only read resources of this type"
        );
        let a = attrs("get", "", "configmaps", "default", "lock");
        assert_eq!(
            authorize(&w, &a, false).unwrap_err(),
            "no relationship found between node 'w-1' and this object"
        );
    }

    #[test]
    fn the_admin_may_do_anything_but_what_a_fault_forbids() {
        let admin = User {
            name: "kubernetes-admin".into(),
            groups: vec!["kubeadm:cluster-admins".into()],
        };
        let a = attrs("patch", "apps", "daemonsets", "kube-system", "kured");
        assert!(authorize(&admin, &a, false).is_ok());
        assert!(authorize(&admin, &a, true).is_err());
        assert!(
            authorize(
                &admin,
                &attrs("get", "apps", "daemonsets", "kube-system", "kured"),
                true
            )
            .is_ok()
        );
    }

    #[test]
    fn cluster_scoped_refusals_say_so() {
        let w = node("w-1");
        let a = attrs("delete", "", "namespaces", "", "default");
        let f = refusal(&w, &a, &authorize(&w, &a, false).unwrap_err());
        assert_eq!(
            f.body["message"],
            "namespaces \"default\" is forbidden: User \"system:node:w-1\" cannot delete resource \
             \"namespaces\" in API group \"\" at the cluster scope"
        );
    }
}
