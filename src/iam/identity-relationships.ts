// The four ways an identity can be assumed (Identity.relationship), their validation, and their
// storage as (relationship_type, canonical JSON) plus the exact issuer/subject for lookups.
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { importJWK, type JWK } from "jose";
import {
  Identity_AWSIdentitySchema,
  Identity_ClaimMatchSchema,
  Identity_StaticKeysSchema,
  RelationshipType,
  ServicePrincipal,
  type Identity,
  type Identity_AWSIdentity,
  type Identity_ClaimMatch,
  type Identity_StaticKeys,
} from "../gen/chainguard/platform/iam/v2beta1/identities_pb.js";
import type { FieldViolation } from "../core/errors.js";
import { patternProblem } from "../core/patterns.js";

type Relationship = Identity["relationship"];

export interface StoredRelationship {
  type: RelationshipType;
  json: JsonValue;
  issuer: string | null;
  subject: string | null;
}

const MAX_JWKS_LENGTH = 64 * 1024;

function urlProblem(value: string): string | undefined {
  try {
    const u = new URL(value);
    if (u.protocol !== "https:" && u.protocol !== "http:") return "must be an http(s) URL";
    return undefined;
  } catch {
    return "must be an absolute URL";
  }
}

function claimMatchViolations(cm: Identity_ClaimMatch, out: FieldViolation[]): void {
  const p = "claim_match";
  if (!cm.iss.case || cm.iss.value === "")
    out.push({ field: `${p}.issuer`, description: "one of issuer or issuer_pattern is required" });
  else if (cm.iss.case === "issuer") {
    const problem = urlProblem(cm.iss.value);
    if (problem) out.push({ field: `${p}.issuer`, description: `issuer ${problem}` });
  } else {
    const problem = patternProblem(cm.iss.value);
    if (problem) out.push({ field: `${p}.issuer_pattern`, description: problem });
  }
  if (!cm.sub.case || cm.sub.value === "")
    out.push({ field: `${p}.subject`, description: "one of subject or subject_pattern is required" });
  else if (cm.sub.case === "subjectPattern") {
    const problem = patternProblem(cm.sub.value);
    if (problem) out.push({ field: `${p}.subject_pattern`, description: problem });
  }
  if (cm.aud.case === "audiencePattern") {
    const problem = patternProblem(cm.aud.value);
    if (problem) out.push({ field: `${p}.audience_pattern`, description: problem });
  }
  for (const key of Object.keys(cm.claims)) {
    if (key === "") out.push({ field: `${p}.claims`, description: "claim names must not be empty" });
  }
  for (const [key, pattern] of Object.entries(cm.claimPatterns)) {
    if (key === "") out.push({ field: `${p}.claim_patterns`, description: "claim names must not be empty" });
    const problem = patternProblem(pattern);
    if (problem) out.push({ field: `${p}.claim_patterns[${key}]`, description: problem });
  }
}

/** issuer_keys must be a JWKS of public signing keys that jose can import. */
async function jwksProblem(text: string): Promise<string | undefined> {
  if (text.length > MAX_JWKS_LENGTH) return `must be at most ${MAX_JWKS_LENGTH} bytes`;
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    return "must be a JWKS JSON document";
  }
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) return 'must be a JWKS with a non-empty "keys" array';
  for (const [i, key] of keys.entries()) {
    const jwk = key as JWK;
    if (!jwk || typeof jwk !== "object") return `keys[${i}] is not a JWK`;
    if (jwk.kty === "oct") return `keys[${i}]: symmetric keys are not allowed`;
    if ("d" in jwk || "p" in jwk || "q" in jwk) return `keys[${i}]: private key material is not allowed`;
    try {
      await importJWK(jwk, jwk.alg ?? defaultAlg(jwk));
    } catch (err) {
      return `keys[${i}] cannot be used: ${(err as Error).message}`;
    }
  }
  return undefined;
}

function defaultAlg(jwk: JWK): string {
  if (jwk.kty === "EC") return jwk.crv === "P-384" ? "ES384" : jwk.crv === "P-521" ? "ES512" : "ES256";
  if (jwk.kty === "OKP") return "EdDSA";
  return "RS256";
}

async function staticKeysViolations(sk: Identity_StaticKeys, now: Date, out: FieldViolation[]): Promise<void> {
  const p = "static_keys";
  if (sk.issuer === "") out.push({ field: `${p}.issuer`, description: "is required" });
  else {
    const problem = urlProblem(sk.issuer);
    if (problem) out.push({ field: `${p}.issuer`, description: `issuer ${problem}` });
  }
  if (sk.subject === "") out.push({ field: `${p}.subject`, description: "is required" });
  if (sk.issuerKeys === "") out.push({ field: `${p}.issuer_keys`, description: "is required" });
  else {
    const problem = await jwksProblem(sk.issuerKeys);
    if (problem) out.push({ field: `${p}.issuer_keys`, description: problem });
  }
  if (sk.expirationTime && timestampDate(sk.expirationTime) <= now) {
    out.push({ field: `${p}.expiration_time`, description: "must be in the future" });
  }
  if (sk.audiences.some((a) => a === ""))
    out.push({ field: `${p}.audiences`, description: "audiences must not be empty" });
}

function awsViolations(aws: Identity_AWSIdentity, out: FieldViolation[]): void {
  const p = "aws_identity";
  if (!/^\d{12}$/.test(aws.awsAccount))
    out.push({ field: `${p}.aws_account`, description: "must be a 12-digit AWS account id" });
  if (!aws.awsArn.case || aws.awsArn.value === "")
    out.push({ field: `${p}.arn`, description: "one of arn or arn_pattern is required" });
  else if (aws.awsArn.case === "arn" && !aws.awsArn.value.startsWith("arn:"))
    out.push({ field: `${p}.arn`, description: 'must start with "arn:"' });
  else if (aws.awsArn.case === "arnPattern") {
    const problem = patternProblem(aws.awsArn.value);
    if (problem) out.push({ field: `${p}.arn_pattern`, description: problem });
  }
  if (aws.awsUserId.case === "userIdPattern") {
    const problem = patternProblem(aws.awsUserId.value);
    if (problem) out.push({ field: `${p}.user_id_pattern`, description: problem });
  }
}

/** Violations of the identity's relationship (exactly one kind, and a valid one). */
export async function relationshipViolations(relationship: Relationship, now: Date): Promise<FieldViolation[]> {
  const out: FieldViolation[] = [];
  switch (relationship.case) {
    case undefined:
      out.push({
        field: "relationship",
        description: "one of claim_match, static_keys, aws_identity or service_principal is required",
      });
      break;
    case "claimMatch":
      claimMatchViolations(relationship.value, out);
      break;
    case "staticKeys":
      await staticKeysViolations(relationship.value, now, out);
      break;
    case "awsIdentity":
      awsViolations(relationship.value, out);
      break;
    case "servicePrincipal":
      if (relationship.value === ServicePrincipal.UNSPECIFIED || ServicePrincipal[relationship.value] === undefined) {
        out.push({ field: "service_principal", description: "must be a known service principal" });
      }
      break;
  }
  return out;
}

export function storeRelationship(relationship: Relationship): StoredRelationship {
  switch (relationship.case) {
    case "claimMatch": {
      const cm = relationship.value;
      return {
        type: RelationshipType.CLAIM_MATCH,
        json: toJson(Identity_ClaimMatchSchema, cm),
        issuer: cm.iss.case === "issuer" ? cm.iss.value : null,
        subject: cm.sub.case === "subject" ? cm.sub.value : null,
      };
    }
    case "staticKeys":
      return {
        type: RelationshipType.STATIC,
        json: toJson(Identity_StaticKeysSchema, relationship.value),
        issuer: relationship.value.issuer,
        subject: relationship.value.subject,
      };
    case "awsIdentity":
      return {
        type: RelationshipType.AWS_IDENTITY,
        json: toJson(Identity_AWSIdentitySchema, relationship.value),
        issuer: null,
        subject: null,
      };
    case "servicePrincipal":
      return {
        type: RelationshipType.SERVICE_PRINCIPAL,
        json: ServicePrincipal[relationship.value] ?? relationship.value,
        issuer: null,
        subject: null,
      };
    default:
      throw new Error("identity without a relationship");
  }
}

export function loadRelationship(type: number, json: unknown): Relationship {
  switch (type) {
    case RelationshipType.CLAIM_MATCH:
      return { case: "claimMatch", value: fromJson(Identity_ClaimMatchSchema, json as JsonValue) };
    case RelationshipType.STATIC:
      return { case: "staticKeys", value: fromJson(Identity_StaticKeysSchema, json as JsonValue) };
    case RelationshipType.AWS_IDENTITY:
      return { case: "awsIdentity", value: fromJson(Identity_AWSIdentitySchema, json as JsonValue) };
    case RelationshipType.SERVICE_PRINCIPAL:
      return {
        case: "servicePrincipal",
        value:
          typeof json === "string"
            ? (ServicePrincipal[json as keyof typeof ServicePrincipal] as ServicePrincipal)
            : (json as ServicePrincipal),
      };
    default:
      return { case: undefined };
  }
}

/** The issuer and subject a role binding shows for an identity (from its claim match). */
export function displayIssuerSubject(type: number, json: unknown): { issuer: string; subject: string } {
  const r = loadRelationship(type, json);
  if (r.case === "claimMatch") return { issuer: r.value.iss.value ?? "", subject: r.value.sub.value ?? "" };
  if (r.case === "staticKeys") return { issuer: r.value.issuer, subject: r.value.subject };
  return { issuer: "", subject: "" };
}
