// The built-in roles: present on every database, with uids that never change across installs,
// and the capability sets that define them. This is the one place they are defined.
//
// Capability sets are the reference's built-in sets (reference/api-surface.json "builtinRoles",
// expanded): viewer = ViewerCaps, editor = EditorCaps, owner = OwnerCaps, registry.pull =
// RegistryPullCaps, registry.push = RegistryPushCaps, registry.pull_token_creator =
// RegistryPullTokenCreatorCaps. A binding at group G grants them on G and everything beneath it.
//
// Uids: viewer's is the hosted API's well-known uid; the others are
// sha1("bulwark/builtin-role/" + name), so every install derives the same ones.
import { createHash } from "node:crypto";
import { Capability } from "../gen/capabilities/capabilities_pb.js";

export interface BuiltinRole {
  uid: string;
  name: string;
  description: string;
  /** the reference's capability-set name this role is */
  capabilitySet: string;
  capabilities: Capability[];
}

const VIEWER_UID = "63921b2c44617e3f2603851537be0123af4a57d7";

export function builtinRoleUid(name: string): string {
  return name === "viewer" ? VIEWER_UID : createHash("sha1").update(`bulwark/builtin-role/${name}`).digest("hex");
}

function role(name: string, description: string, capabilitySet: string, capabilities: Capability[]): BuiltinRole {
  return { uid: builtinRoleUid(name), name, description, capabilitySet, capabilities };
}

export const BUILTIN_ROLES: readonly BuiltinRole[] = [
  role("viewer", "Viewer Role (built-in)", "ViewerCaps", [
    Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_IAM_GROUP_INVITES_LIST, Capability.CAP_IAM_ROLES_LIST,
    Capability.CAP_IAM_ROLE_BINDINGS_LIST, Capability.CAP_TENANT_RECORD_SIGNATURES_LIST,
    Capability.CAP_TENANT_SBOMS_LIST, Capability.CAP_TENANT_VULN_REPORTS_LIST,
    Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST, Capability.CAP_IAM_IDENTITY_LIST,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST, Capability.CAP_EVENTS_SUBSCRIPTION_LIST,
    Capability.CAP_REPO_BLOBS_GET, Capability.CAP_REPO_LIST, Capability.CAP_MANIFEST_LIST,
    Capability.CAP_TAG_LIST, Capability.CAP_MANIFEST_METADATA_LIST, Capability.CAP_REFERRERS_LIST,
    Capability.CAP_APK_LIST, Capability.CAP_VERSION_LIST, Capability.CAP_APK_BLOBS_GET,
    Capability.CAP_VULN_REPORT_LIST, Capability.CAP_BUILD_REPORT_LIST,
    Capability.CAP_REGISTRY_ENTITLEMENTS_LIST, Capability.CAP_REGISTRY_SETTINGS_LIST,
    Capability.CAP_REGISTRY_OVERLAYS_LIST, Capability.CAP_LIBRARIES_ENTITLEMENTS_LIST,
    Capability.CAP_LIBRARIES_ARTIFACTS_LIST, Capability.CAP_LIBRARIES_CACHE_LIST,
    Capability.CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_LIST, Capability.CAP_LIBRARIES_REQUEST_GROUPS_LIST,
    Capability.CAP_LIBRARIES_REMOTE_REGISTRIES_LIST, Capability.CAP_ADVISORIES_LIST,
    Capability.CAP_REGISTRY_DEPLOYMENTS_LIST, Capability.CAP_POLICIES_POLICY_LIST,
    Capability.CAP_POLICIES_BINDING_LIST, Capability.CAP_POLICIES_DECISION_LIST,
    Capability.CAP_POLICIES_OVERRIDE_LIST, Capability.CAP_PACKAGES_ENTITLEMENTS_LIST,
    Capability.CAP_TERMS_LIST, Capability.CAP_GUARDENER_DFC_CONVERT,
    Capability.CAP_GUARDENER_ASSOCIATION_LIST, Capability.CAP_GUARDENER_ENTITLEMENT_LIST,
    Capability.CAP_GUARDENER_ACTIONS_MIGRATE, Capability.CAP_GUARDENER_SCAN_LIST,
    Capability.CAP_GUARDENER_SCAN_GET, Capability.CAP_SKILLS_ENTITLEMENTS_LIST, Capability.CAP_SKILLS_LIST,
    Capability.CAP_LIBRARIES_POLICY_LIST, Capability.CAP_LIBRARIES_POLICY_BINDING_LIST,
    Capability.CAP_LIBRARIES_POLICY_BLOCK_EVENT_LIST, Capability.CAP_ACTIONS_LIST,
  ]),
  role("editor", "Editor Role (built-in)", "EditorCaps", [
    Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_IAM_GROUP_INVITES_LIST, Capability.CAP_IAM_ROLES_LIST,
    Capability.CAP_IAM_ROLE_BINDINGS_LIST, Capability.CAP_TENANT_RECORD_SIGNATURES_LIST,
    Capability.CAP_TENANT_SBOMS_LIST, Capability.CAP_TENANT_VULN_REPORTS_LIST,
    Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST, Capability.CAP_IAM_IDENTITY_LIST,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST, Capability.CAP_EVENTS_SUBSCRIPTION_CREATE,
    Capability.CAP_EVENTS_SUBSCRIPTION_UPDATE, Capability.CAP_EVENTS_SUBSCRIPTION_LIST,
    Capability.CAP_EVENTS_SUBSCRIPTION_DELETE, Capability.CAP_REPO_BLOBS_GET, Capability.CAP_REPO_CREATE,
    Capability.CAP_REPO_UPDATE, Capability.CAP_REPO_LIST, Capability.CAP_REPO_DELETE,
    Capability.CAP_MANIFEST_LIST, Capability.CAP_TAG_LIST, Capability.CAP_MANIFEST_METADATA_LIST,
    Capability.CAP_REFERRERS_LIST, Capability.CAP_APK_LIST, Capability.CAP_VERSION_LIST,
    Capability.CAP_APK_BLOBS_GET, Capability.CAP_VULN_REPORT_LIST, Capability.CAP_BUILD_REPORT_LIST,
    Capability.CAP_REGISTRY_ENTITLEMENTS_LIST, Capability.CAP_REGISTRY_SETTINGS_LIST,
    Capability.CAP_REGISTRY_OVERLAYS_LIST, Capability.CAP_REGISTRY_OVERLAYS_EDIT,
    Capability.CAP_LIBRARIES_ENTITLEMENTS_LIST, Capability.CAP_LIBRARIES_ARTIFACTS_LIST,
    Capability.CAP_LIBRARIES_CACHE_LIST, Capability.CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_LIST,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_CREATE, Capability.CAP_LIBRARIES_REQUEST_GROUPS_LIST,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_UPDATE, Capability.CAP_LIBRARIES_REQUEST_GROUPS_DELETE,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_ITEMS_UPDATE, Capability.CAP_LIBRARIES_REMOTE_REGISTRIES_LIST,
    Capability.CAP_ADVISORIES_LIST, Capability.CAP_REGISTRY_DEPLOYMENTS_LIST,
    Capability.CAP_POLICIES_POLICY_LIST, Capability.CAP_POLICIES_BINDING_LIST,
    Capability.CAP_POLICIES_DECISION_LIST, Capability.CAP_POLICIES_OVERRIDE_LIST,
    Capability.CAP_PACKAGES_ENTITLEMENTS_LIST, Capability.CAP_TERMS_LIST,
    Capability.CAP_GUARDENER_DFC_CONVERT, Capability.CAP_GUARDENER_ASSOCIATION_LIST,
    Capability.CAP_GUARDENER_ENTITLEMENT_LIST, Capability.CAP_GUARDENER_ACTIONS_MIGRATE,
    Capability.CAP_GUARDENER_SCAN_LIST, Capability.CAP_GUARDENER_SCAN_GET,
    Capability.CAP_SKILLS_ENTITLEMENTS_LIST, Capability.CAP_SKILLS_LIST, Capability.CAP_LIBRARIES_POLICY_LIST,
    Capability.CAP_LIBRARIES_POLICY_BINDING_LIST, Capability.CAP_LIBRARIES_POLICY_BLOCK_EVENT_LIST,
    Capability.CAP_ACTIONS_LIST,
  ]),
  role("owner", "Owner Role (built-in)", "OwnerCaps", [
    Capability.CAP_IAM_GROUPS_CREATE, Capability.CAP_IAM_GROUPS_UPDATE, Capability.CAP_IAM_GROUPS_LIST,
    Capability.CAP_IAM_GROUPS_DELETE, Capability.CAP_IAM_GROUP_INVITES_CREATE,
    Capability.CAP_IAM_GROUP_INVITES_LIST, Capability.CAP_IAM_GROUP_INVITES_DELETE,
    Capability.CAP_IAM_ROLES_CREATE, Capability.CAP_IAM_ROLES_UPDATE, Capability.CAP_IAM_ROLES_LIST,
    Capability.CAP_IAM_ROLES_DELETE, Capability.CAP_IAM_ROLE_BINDINGS_CREATE,
    Capability.CAP_IAM_ROLE_BINDINGS_UPDATE, Capability.CAP_IAM_ROLE_BINDINGS_LIST,
    Capability.CAP_IAM_ROLE_BINDINGS_DELETE, Capability.CAP_TENANT_RECORD_SIGNATURES_LIST,
    Capability.CAP_TENANT_SBOMS_LIST, Capability.CAP_TENANT_VULN_REPORTS_LIST,
    Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_CREATE, Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_UPDATE,
    Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_LIST, Capability.CAP_IAM_ACCOUNT_ASSOCIATIONS_DELETE,
    Capability.CAP_IAM_IDENTITY_CREATE, Capability.CAP_IAM_IDENTITY_UPDATE, Capability.CAP_IAM_IDENTITY_LIST,
    Capability.CAP_IAM_IDENTITY_DELETE, Capability.CAP_IAM_IDENTITY_PROVIDERS_CREATE,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_UPDATE, Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_DELETE, Capability.CAP_IAM_SCIM_MANAGE,
    Capability.CAP_EVENTS_SUBSCRIPTION_CREATE, Capability.CAP_EVENTS_SUBSCRIPTION_UPDATE,
    Capability.CAP_EVENTS_SUBSCRIPTION_LIST, Capability.CAP_EVENTS_SUBSCRIPTION_DELETE,
    Capability.CAP_REPO_BLOBS_GET, Capability.CAP_REPO_CREATE, Capability.CAP_REPO_UPDATE,
    Capability.CAP_REPO_LIST, Capability.CAP_REPO_DELETE, Capability.CAP_MANIFEST_CREATE,
    Capability.CAP_MANIFEST_UPDATE, Capability.CAP_MANIFEST_LIST, Capability.CAP_MANIFEST_DELETE,
    Capability.CAP_TAG_CREATE, Capability.CAP_TAG_UPDATE, Capability.CAP_TAG_LIST, Capability.CAP_TAG_DELETE,
    Capability.CAP_MANIFEST_METADATA_LIST, Capability.CAP_REFERRERS_LIST, Capability.CAP_APK_CREATE,
    Capability.CAP_APK_LIST, Capability.CAP_APK_DELETE, Capability.CAP_VERSION_LIST,
    Capability.CAP_APK_BLOBS_GET, Capability.CAP_VULN_REPORT_CREATE, Capability.CAP_VULN_REPORT_LIST,
    Capability.CAP_VULN_CREATE, Capability.CAP_BUILD_REPORT_LIST, Capability.CAP_REGISTRY_ENTITLEMENTS_LIST,
    Capability.CAP_REGISTRY_SETTINGS_LIST, Capability.CAP_REGISTRY_ENTITLEMENTS_IMAGES_ADD,
    Capability.CAP_REGISTRY_ENTITLEMENTS_IMAGES_REMOVE, Capability.CAP_REGISTRY_ENTITLEMENTS_IMAGES_SWAP,
    Capability.CAP_REGISTRY_OVERLAYS_LIST, Capability.CAP_REGISTRY_OVERLAYS_EDIT,
    Capability.CAP_LIBRARIES_ENTITLEMENTS_CREATE, Capability.CAP_LIBRARIES_ENTITLEMENTS_LIST,
    Capability.CAP_LIBRARIES_ENTITLEMENTS_DELETE, Capability.CAP_LIBRARIES_ARTIFACTS_LIST,
    Capability.CAP_LIBRARIES_PYTHON_LIST, Capability.CAP_LIBRARIES_PYTHON_CREATE,
    Capability.CAP_LIBRARIES_JAVA_LIST, Capability.CAP_LIBRARIES_JAVA_CREATE,
    Capability.CAP_LIBRARIES_JAVASCRIPT_LIST, Capability.CAP_LIBRARIES_JAVASCRIPT_CREATE,
    Capability.CAP_LIBRARIES_DOTNET_LIST, Capability.CAP_LIBRARIES_DOTNET_CREATE,
    Capability.CAP_LIBRARIES_GO_LIST, Capability.CAP_LIBRARIES_GO_CREATE,
    Capability.CAP_LIBRARIES_CACHE_INVALIDATE, Capability.CAP_LIBRARIES_CACHE_LIST,
    Capability.CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_CREATE,
    Capability.CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_UPDATE,
    Capability.CAP_LIBRARIES_AWS_MARKETPLACE_SUBSCRIPTIONS_LIST,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_CREATE, Capability.CAP_LIBRARIES_REQUEST_GROUPS_LIST,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_UPDATE, Capability.CAP_LIBRARIES_REQUEST_GROUPS_DELETE,
    Capability.CAP_LIBRARIES_REQUEST_GROUPS_SUBMIT, Capability.CAP_LIBRARIES_REQUEST_GROUPS_ITEMS_UPDATE,
    Capability.CAP_LIBRARIES_REMOTE_REGISTRIES_CREATE, Capability.CAP_LIBRARIES_REMOTE_REGISTRIES_LIST,
    Capability.CAP_LIBRARIES_REMOTE_REGISTRIES_DELETE, Capability.CAP_ADVISORIES_LIST,
    Capability.CAP_REGISTRY_DEPLOYMENTS_LIST, Capability.CAP_POLICIES_POLICY_CREATE,
    Capability.CAP_POLICIES_POLICY_UPDATE, Capability.CAP_POLICIES_POLICY_LIST,
    Capability.CAP_POLICIES_POLICY_DELETE, Capability.CAP_POLICIES_BINDING_CREATE,
    Capability.CAP_POLICIES_BINDING_UPDATE, Capability.CAP_POLICIES_BINDING_LIST,
    Capability.CAP_POLICIES_BINDING_DELETE, Capability.CAP_POLICIES_DECISION_LIST,
    Capability.CAP_POLICIES_OVERRIDE_CREATE, Capability.CAP_POLICIES_OVERRIDE_LIST,
    Capability.CAP_POLICIES_OVERRIDE_DELETE, Capability.CAP_REPO_CHECK_POLICIES,
    Capability.CAP_PACKAGES_ENTITLEMENTS_LIST, Capability.CAP_TERMS_ACCEPT, Capability.CAP_TERMS_LIST,
    Capability.CAP_GUARDENER_DFC_CONVERT, Capability.CAP_GUARDENER_ASSOCIATION_MANAGE,
    Capability.CAP_GUARDENER_ASSOCIATION_LIST, Capability.CAP_GUARDENER_ENTITLEMENT_LIST,
    Capability.CAP_GUARDENER_ACTIONS_MIGRATE, Capability.CAP_GUARDENER_SCAN_LIST,
    Capability.CAP_GUARDENER_SCAN_GET, Capability.CAP_MCP_TOOL_CALL, Capability.CAP_SKILLS_PUBLISH,
    Capability.CAP_SKILLS_ENTITLEMENTS_CREATE, Capability.CAP_SKILLS_ENTITLEMENTS_LIST,
    Capability.CAP_SKILLS_ENTITLEMENTS_DELETE, Capability.CAP_SKILLS_LIST, Capability.CAP_SKILLS_HARDEN_READ,
    Capability.CAP_SKILLS_HARDEN_WRITE, Capability.CAP_SKILLS_HARDEN_CANCEL,
    Capability.CAP_LIBRARIES_POLICY_CREATE, Capability.CAP_LIBRARIES_POLICY_UPDATE,
    Capability.CAP_LIBRARIES_POLICY_LIST, Capability.CAP_LIBRARIES_POLICY_DELETE,
    Capability.CAP_LIBRARIES_POLICY_BINDING_CREATE, Capability.CAP_LIBRARIES_POLICY_BINDING_UPDATE,
    Capability.CAP_LIBRARIES_POLICY_BINDING_LIST, Capability.CAP_LIBRARIES_POLICY_BINDING_DELETE,
    Capability.CAP_LIBRARIES_POLICY_BLOCK_EVENT_LIST, Capability.CAP_ACTIONS_LIST,
  ]),
  role("registry.pull", "Registry Pull Role (built-in)", "RegistryPullCaps", [
    Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_TENANT_RECORD_SIGNATURES_LIST,
    Capability.CAP_TENANT_SBOMS_LIST, Capability.CAP_TENANT_VULN_REPORTS_LIST, Capability.CAP_REPO_BLOBS_GET,
    Capability.CAP_REPO_LIST, Capability.CAP_MANIFEST_LIST, Capability.CAP_TAG_LIST,
    Capability.CAP_MANIFEST_METADATA_LIST, Capability.CAP_REFERRERS_LIST,
  ]),
  role("registry.push", "Registry Push Role (built-in)", "RegistryPushCaps", [
    Capability.CAP_IAM_GROUPS_CREATE, Capability.CAP_IAM_GROUPS_LIST,
    Capability.CAP_TENANT_RECORD_SIGNATURES_LIST, Capability.CAP_TENANT_SBOMS_LIST,
    Capability.CAP_TENANT_VULN_REPORTS_LIST, Capability.CAP_REPO_BLOBS_GET, Capability.CAP_REPO_CREATE,
    Capability.CAP_REPO_UPDATE, Capability.CAP_REPO_LIST, Capability.CAP_REPO_DELETE,
    Capability.CAP_MANIFEST_CREATE, Capability.CAP_MANIFEST_UPDATE, Capability.CAP_MANIFEST_LIST,
    Capability.CAP_MANIFEST_DELETE, Capability.CAP_TAG_CREATE, Capability.CAP_TAG_UPDATE,
    Capability.CAP_TAG_LIST, Capability.CAP_TAG_DELETE, Capability.CAP_MANIFEST_METADATA_LIST,
    Capability.CAP_REFERRERS_LIST,
  ]),
  role("registry.pull_token_creator", "Registry Pull Token Creator Role (built-in)", "RegistryPullTokenCreatorCaps", [
    Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_IAM_ROLES_LIST, Capability.CAP_IAM_ROLE_BINDINGS_CREATE,
    Capability.CAP_TENANT_RECORD_SIGNATURES_LIST, Capability.CAP_TENANT_SBOMS_LIST,
    Capability.CAP_TENANT_VULN_REPORTS_LIST, Capability.CAP_IAM_IDENTITY_CREATE,
    Capability.CAP_REPO_BLOBS_GET, Capability.CAP_REPO_LIST, Capability.CAP_MANIFEST_LIST,
    Capability.CAP_TAG_LIST, Capability.CAP_MANIFEST_METADATA_LIST, Capability.CAP_REFERRERS_LIST,
    Capability.CAP_APK_LIST, Capability.CAP_APK_BLOBS_GET,
  ]),
];

export const BUILTIN_ROLE_BY_NAME = new Map(BUILTIN_ROLES.map((r) => [r.name, r]));
