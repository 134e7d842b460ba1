// AccountAssociationsService: a group's links to cloud accounts (AWS, Google Cloud, Azure, GitHub
// app installations, Chainguard service bindings). One per group: created at
// accountAssociations/<group uid>, and its uid is the group's uid.
//
// CheckAccountAssociation answers honestly: this server has no way to reach any cloud provider,
// so it never reports READY; it says whether the requested provider's block is configured.
import { create, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  AccountAssociationSchema,
  AccountAssociation_AmazonSchema,
  AccountAssociation_AzureSchema,
  AccountAssociation_ChainguardSchema,
  AccountAssociation_GitHubSchema,
  AccountAssociation_GoogleSchema,
  AccountAssociationsService,
  AccountProviderType,
  CheckStatus,
  ListAccountAssociationsRequestSchema,
  type AccountAssociation,
} from "../gen/chainguard/platform/iam/v2beta1/account_associations_pb.js";
import { invalidArgument, type FieldViolation } from "../core/errors.js";
import { applyFieldMask } from "../core/fieldmask.js";
import { NAMED_RESOURCE_LISTING, type ListableResource, type ListEngineDeps } from "../core/list.js";
import { listResponse } from "../platform/list.js";
import { bindService } from "../core/service.js";
import { parentOf } from "../core/uidp.js";
import { deleted, found, written } from "../platform/outcomes.js";
import { descriptionViolations, nameViolations, requireUid, throwIfViolations } from "../core/validate.js";
import type {
  AccountAssociationFields,
  AccountAssociationRow,
  AccountAssociationsRepository,
} from "./storage/account-associations.js";

export const accountAssociationListing: ListableResource = NAMED_RESOURCE_LISTING;

const ignoreUnknownFields = { ignoreUnknownFields: true };

export function toAccountAssociation(row: AccountAssociationRow): AccountAssociation {
  const p = (row.providers ?? {}) as Record<string, JsonValue | undefined>;
  return create(AccountAssociationSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    amazon:
      p.amazon === undefined ? undefined : fromJson(AccountAssociation_AmazonSchema, p.amazon, ignoreUnknownFields),
    google:
      p.google === undefined ? undefined : fromJson(AccountAssociation_GoogleSchema, p.google, ignoreUnknownFields),
    azure: p.azure === undefined ? undefined : fromJson(AccountAssociation_AzureSchema, p.azure, ignoreUnknownFields),
    github:
      p.github === undefined ? undefined : fromJson(AccountAssociation_GitHubSchema, p.github, ignoreUnknownFields),
    chainguard:
      p.chainguard === undefined
        ? undefined
        : fromJson(AccountAssociation_ChainguardSchema, p.chainguard, ignoreUnknownFields),
    createTime: timestampFromDate(row.create_time),
    updateTime: timestampFromDate(row.update_time),
  });
}

/** The present provider blocks, each as its canonical JSON (what the `providers` column holds). */
function providersJson(a: AccountAssociation): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  if (a.amazon) out.amazon = toJson(AccountAssociation_AmazonSchema, a.amazon);
  if (a.google) out.google = toJson(AccountAssociation_GoogleSchema, a.google);
  if (a.azure) out.azure = toJson(AccountAssociation_AzureSchema, a.azure);
  if (a.github) out.github = toJson(AccountAssociation_GitHubSchema, a.github);
  if (a.chainguard) out.chainguard = toJson(AccountAssociation_ChainguardSchema, a.chainguard);
  return out;
}

const AWS_ACCOUNT = /^[0-9]{12}$/;
const GCP_PROJECT_ID = /^[a-z][a-z0-9-]{5,29}$/;
const DIGITS = /^[0-9]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `field` is required: "is required" when empty, else `rule` when `ok` fails. */
function check(v: FieldViolation[], field: string, value: string, ok: boolean, rule: string): void {
  if (value === "") v.push({ field, description: "is required" });
  else if (!ok) v.push({ field, description: rule });
}

function mapKey(field: string, key: string): string {
  return `${field}[${JSON.stringify(key)}]`;
}

function providerViolations(a: AccountAssociation): FieldViolation[] {
  const v: FieldViolation[] = [];
  if (!a.amazon && !a.google && !a.azure && !a.github && !a.chainguard) {
    v.push({
      field: "account_association",
      description: "at least one provider block (amazon, google, azure, github, chainguard) is required",
    });
  }
  if (a.amazon) {
    check(
      v,
      "amazon.account",
      a.amazon.account,
      AWS_ACCOUNT.test(a.amazon.account),
      "must be a 12-digit AWS account ID",
    );
  }
  if (a.google) {
    const { projectId, projectNumber } = a.google;
    check(
      v,
      "google.project_id",
      projectId,
      GCP_PROJECT_ID.test(projectId),
      "must be 6 to 30 lowercase letters, digits or hyphens, starting with a letter",
    );
    check(v, "google.project_number", projectNumber, DIGITS.test(projectNumber), "must be a decimal number");
  }
  if (a.azure) {
    check(v, "azure.tenant_id", a.azure.tenantId, UUID.test(a.azure.tenantId), "must be a UUID");
    const clients = Object.entries(a.azure.clientIds);
    if (clients.length === 0)
      v.push({ field: "azure.client_ids", description: "is required (at least one name -> client ID)" });
    for (const [name, id] of clients) {
      if (name.trim() === "")
        v.push({ field: mapKey("azure.client_ids", name), description: "name must not be empty" });
      check(v, mapKey("azure.client_ids", name), id, UUID.test(id), "must be a UUID");
    }
  }
  if (a.github) {
    for (const [appId, app] of Object.entries(a.github.appInstallations)) {
      const field = `github.app_installations[${appId}]`;
      if (BigInt(appId) <= 0n) v.push({ field, description: "app ID must be positive" });
      const seen = new Set<bigint>();
      app.installations.forEach((inst, i) => {
        const f = `${field}.installations[${i}].installation_id`;
        if (inst.installationId <= 0n) v.push({ field: f, description: "must be positive" });
        else if (seen.has(inst.installationId))
          v.push({ field: f, description: `duplicate installation ${inst.installationId}` });
        seen.add(inst.installationId);
      });
    }
  }
  if (a.chainguard) {
    const bindings = Object.entries(a.chainguard.serviceBindings);
    if (bindings.length === 0)
      v.push({ field: "chainguard.service_bindings", description: "is required (at least one binding)" });
    for (const [service, target] of bindings) {
      if (service.trim() === "")
        v.push({
          field: mapKey("chainguard.service_bindings", service),
          description: "service name must not be empty",
        });
      if (target === "") v.push({ field: mapKey("chainguard.service_bindings", service), description: "is required" });
    }
  }
  return v;
}

function validated(a: AccountAssociation): AccountAssociationFields {
  throwIfViolations([...nameViolations(a.name), ...descriptionViolations(a.description), ...providerViolations(a)]);
  return { name: a.name, description: a.description, providers: providersJson(a) };
}

const CHECKABLE: Partial<
  Record<
    AccountProviderType,
    { block: "google" | "amazon" | "azure"; cloud: string; describe: (a: AccountAssociation) => string }
  >
> = {
  [AccountProviderType.AMAZON]: { block: "amazon", cloud: "AWS", describe: (a) => `account ${a.amazon!.account}` },
  [AccountProviderType.GOOGLE]: {
    block: "google",
    cloud: "Google Cloud",
    describe: (a) => `project ${a.google!.projectId}`,
  },
  [AccountProviderType.AZURE]: { block: "azure", cloud: "Azure", describe: (a) => `tenant ${a.azure!.tenantId}` },
};

export interface AccountAssociationsDeps {
  accountAssociations: AccountAssociationsRepository;
  lists: ListEngineDeps;
  now: () => Date;
}

export function accountAssociationsService({ accountAssociations, lists, now }: AccountAssociationsDeps) {
  return bindService(AccountAssociationsService, {
    async createAccountAssociation(req) {
      requireUid("parent", req.parent);
      const fields = validated(req.accountAssociation ?? create(AccountAssociationSchema));
      return toAccountAssociation(
        written(await accountAssociations.insert(req.parent, parentOf(req.parent) ?? null, fields, now())),
      );
    },

    async getAccountAssociation(req, call) {
      requireUid("uid", req.uid);
      return toAccountAssociation(
        found(await accountAssociations.get(req.uid, call.freshness), "account association", req.uid),
      );
    },

    async listAccountAssociations(req, call) {
      const { items, ...page } = await listResponse({
        lists,
        resource: accountAssociationListing,
        schema: ListAccountAssociationsRequestSchema,
        request: req,
        query: accountAssociations.listQuery({ uidp: req.uidp, name: req.name }),
        toItems: (rows: AccountAssociationRow[]) => rows.map(toAccountAssociation),
        call,
      });
      return { accountAssociations: items, ...page };
    },

    async updateAccountAssociation(req) {
      const patch = req.accountAssociation;
      if (!patch) throw invalidArgument({ field: "account_association", description: "is required" });
      requireUid("account_association.uid", patch.uid);
      const result = await accountAssociations.update(
        patch.uid,
        (current) =>
          validated(
            applyFieldMask(AccountAssociationSchema, toAccountAssociation(current), patch, req.updateMask).updated,
          ),
        now(),
      );
      return toAccountAssociation(written(result));
    },

    async deleteAccountAssociation(req) {
      requireUid("uid", req.uid);
      return deleted(await accountAssociations.delete(req.uid), "account association", req.uid);
    },

    async checkAccountAssociation(req) {
      requireUid("uid", req.uid);
      const provider = CHECKABLE[req.providerType];
      if (!provider) {
        throw invalidArgument({
          field: "provider_type",
          description:
            req.providerType === AccountProviderType.UNSPECIFIED
              ? "is required"
              : `unknown AccountProviderType ${req.providerType}`,
        });
      }
      const association = toAccountAssociation(
        found(await accountAssociations.get(req.uid), "account association", req.uid),
      );
      if (!association[provider.block]) {
        return {
          status: CheckStatus.NOT_READY,
          reason: "NOT_CONFIGURED",
          message: `the account association has no ${provider.block} configuration`,
        };
      }
      return {
        status: CheckStatus.NOT_READY,
        reason: "UNVERIFIABLE",
        message:
          `the ${provider.block} configuration (${provider.describe(association)}) is present, ` +
          `but it cannot be verified from this server: it has no access to ${provider.cloud}`,
      };
    },
  });
}
