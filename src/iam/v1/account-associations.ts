// v1 GroupAccountAssociations onto the v2beta1 AccountAssociationsService. A group has at most
// one association and its uid is the group's, so v1 addresses it by `group`. The account
// details (Amazon, Google, Azure, GitHub, Chainguard) are the same on the wire in both generations.
import { create } from "@bufbuild/protobuf";
import * as v1 from "../../gen/platform/iam/v1/account_associations.platform_pb.js";
import * as beta from "../../gen/chainguard/platform/iam/v2beta1/account_associations_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";
import { REPLACE_ALL, delegateTo, listAll, oneOrNone, sameWire } from "../../platform/v1.js";

function toV1(a: beta.AccountAssociation): v1.AccountAssociations {
  return create(v1.AccountAssociationsSchema, {
    group: a.uid,
    name: a.name,
    description: a.description,
    amazon: a.amazon && sameWire(v1.AccountAssociations_AmazonSchema, beta.AccountAssociation_AmazonSchema, a.amazon),
    google: a.google && sameWire(v1.AccountAssociations_GoogleSchema, beta.AccountAssociation_GoogleSchema, a.google),
    chainguard:
      a.chainguard &&
      sameWire(v1.AccountAssociations_ChainguardSchema, beta.AccountAssociation_ChainguardSchema, a.chainguard),
    azure: a.azure && sameWire(v1.AccountAssociations_AzureSchema, beta.AccountAssociation_AzureSchema, a.azure),
    github: a.github && sameWire(v1.AccountAssociations_GitHubSchema, beta.AccountAssociation_GitHubSchema, a.github),
  });
}

function fromV1(a: v1.AccountAssociations) {
  return {
    uid: a.group,
    name: a.name,
    description: a.description,
    amazon: a.amazon && sameWire(beta.AccountAssociation_AmazonSchema, v1.AccountAssociations_AmazonSchema, a.amazon),
    google: a.google && sameWire(beta.AccountAssociation_GoogleSchema, v1.AccountAssociations_GoogleSchema, a.google),
    chainguard:
      a.chainguard &&
      sameWire(beta.AccountAssociation_ChainguardSchema, v1.AccountAssociations_ChainguardSchema, a.chainguard),
    azure: a.azure && sameWire(beta.AccountAssociation_AzureSchema, v1.AccountAssociations_AzureSchema, a.azure),
    github: a.github && sameWire(beta.AccountAssociation_GitHubSchema, v1.AccountAssociations_GitHubSchema, a.github),
  };
}

export function v1AccountAssociationsService(bindings: readonly ServiceBinding[]): ServiceBinding {
  const associations = delegateTo(beta.AccountAssociationsService, bindings);
  return bindService(v1.GroupAccountAssociations, {
    async create(req, call) {
      const { uid: _uid, ...accountAssociation } = fromV1(req);
      return toV1(await associations("createAccountAssociation", { parent: req.group, accountAssociation }, call));
    },
    async update(req, call) {
      return toV1(
        await associations(
          "updateAccountAssociation",
          { accountAssociation: fromV1(req), updateMask: REPLACE_ALL },
          call,
        ),
      );
    },
    async list(req, call) {
      const items = req.group
        ? await oneOrNone(() => associations("getAccountAssociation", { uid: req.group }, call))
        : await listAll(async (pageSize, pageToken) => {
            const page = await associations("listAccountAssociations", { name: req.name, pageSize, pageToken }, call);
            return { items: page.accountAssociations, nextPageToken: page.nextPageToken };
          });
      const named = req.group && req.name ? items.filter((a) => a.name === req.name) : items;
      return create(v1.AccountAssociationsListSchema, { items: named.map(toV1) });
    },
    async delete(req, call) {
      return associations("deleteAccountAssociation", { uid: req.group }, call);
    },
    async check(req, call) {
      // The enums number their values alike: GOOGLE/AMAZON/AZURE, READY/NOT_READY.
      const answer = await associations(
        "checkAccountAssociation",
        { uid: req.group, providerType: req.accountType as number },
        call,
      );
      return create(v1.AccountAssociationsStatusSchema, {
        ready: answer.status as number,
        reason: answer.reason,
        message: answer.message,
      });
    },
  });
}
