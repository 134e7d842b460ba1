// What a caller may do, from its role bindings: a binding at group G grants its role's
// capabilities on G and everything beneath it. Nothing is taken from the token except narrowing
// (`caps`, `scopes`). The authorizer (auth/authorizer.ts) caches the bindings only for as long as
// the database's authorization change counter is unchanged, so a new or deleted binding, a
// changed role or a deleted identity takes effect on the next request.
import { Capability } from "../gen/capabilities/capabilities_pb.js";
import { notFound, permissionDenied } from "./errors.js";
import { isAncestorOrSelf } from "./uidp.js";

export interface Grant {
  /** the group the binding is at; EVERYWHERE for the (narrowed) operator */
  at: string;
  capabilities: ReadonlySet<number>;
}

/** A grant location covering every resource (only a narrowed operator token has one). */
export const EVERYWHERE = "*";

function covers(at: string, uid: string): boolean {
  return at === EVERYWHERE || isAncestorOrSelf(at, uid);
}

const ALL_CAPABILITIES: ReadonlySet<number> = new Set(
  Object.values(Capability).filter((v): v is number => typeof v === "number"),
);

export interface Narrowing {
  caps?: ReadonlySet<number>;
  scopes?: readonly string[];
}

export type PrincipalKind = "operator" | "human" | "workload";

export interface Principal {
  kind: PrincipalKind;
  /** the identity uid, or OPERATOR_SUBJECT */
  uid: string;
}

/** The claims of a caller's token, once its signature, issuer, audience and times are checked. */
export interface VerifiedToken {
  subject: string;
  audience: string[];
  issuedAt: Date;
  expiry: Date;
  /** capability names the token is narrowed to */
  caps?: string[];
  /** group uids the token is narrowed to */
  scopes?: string[];
  /**
   * A registry token's grants (distribution token spec `access` claim): the repositories and
   * actions it is limited to; absent on platform tokens, which the registry limits only by role.
   */
  registryAccess?: RegistryGrant[];
  /**
   * For a token from a token exchange or a sign-in: the original token's `iss`, `sub`, `aud` and
   * `email` (our `act` claim, after RFC 8693's actor claim), recorded as the actor of events.
   */
  act?: Readonly<Record<string, string>>;
}

/** One entry of a registry token's `access` claim. */
export interface RegistryGrant {
  type: string;
  name: string;
  actions: string[];
}

/** Subtrees (group uids) the caller may read in, or "all". */
export type Visibility = "all" | readonly string[];

function capabilityNames(caps: readonly number[]): string {
  return caps.map((c) => Capability[c] ?? String(c)).join(", ");
}

export class Access {
  private constructor(
    readonly principal: Principal,
    private readonly grants: readonly Grant[] | "all",
    /** what the token narrowed, if anything: actions outside any group need an unnarrowed token */
    private readonly narrowing: Narrowing = {},
  ) {}

  /** The operator: everything, unless the token narrows it (then it is an ordinary grant set). */
  static operator(principal: Principal, narrowing: Narrowing = {}): Access {
    if (!narrowing.caps && !narrowing.scopes) return new Access(principal, "all");
    return Access.fromGrants(principal, [{ at: EVERYWHERE, capabilities: ALL_CAPABILITIES }], narrowing);
  }

  /**
   * The caller's grants, narrowed by its token: `caps` keeps only those capabilities, `scopes`
   * keeps only the parts of each grant's subtree that lie within one of those groups.
   */
  static fromGrants(principal: Principal, grants: readonly Grant[], narrowing: Narrowing = {}): Access {
    let effective = grants.map((g) => ({
      at: g.at,
      capabilities: narrowing.caps
        ? new Set([...g.capabilities].filter((c) => narrowing.caps!.has(c)))
        : g.capabilities,
    }));
    if (narrowing.scopes) {
      const scopes = narrowing.scopes;
      effective = effective.flatMap((g) =>
        scopes.flatMap((s) =>
          covers(g.at, s) ? [{ ...g, at: s }] : g.at !== EVERYWHERE && isAncestorOrSelf(s, g.at) ? [g] : [],
        ),
      );
    }
    return new Access(
      principal,
      effective.filter((g) => g.capabilities.size > 0),
      narrowing,
    );
  }

  /**
   * Whether the token leaves `caps` untouched and is not confined to groups: acting outside any
   * group (creating an organization) needs that, whatever the identity's bindings.
   */
  unnarrowedFor(caps: readonly number[]): boolean {
    if (this.narrowing.scopes) return false;
    return !this.narrowing.caps || caps.every((c) => this.narrowing.caps!.has(c));
  }

  get isOperator(): boolean {
    return this.grants === "all";
  }

  /** Every capability the caller holds on `uid` (bindings at it or any ancestor). */
  capabilitiesAt(uid: string): Set<number> {
    if (this.grants === "all") return new Set(ALL_CAPABILITIES);
    const held = new Set<number>();
    for (const g of this.grants) if (covers(g.at, uid)) for (const c of g.capabilities) held.add(c);
    return held;
  }

  can(caps: readonly number[], uid: string): boolean {
    if (this.grants === "all") return true;
    const grants = this.grants;
    return caps.every((c) => grants.some((g) => g.capabilities.has(c) && covers(g.at, uid)));
  }

  /** Whether any binding of the caller covers `uid` at all. */
  canSee(uid: string): boolean {
    return this.grants === "all" || this.grants.some((g) => covers(g.at, uid));
  }

  /** Whether the caller holds `caps` somewhere (for resources that belong to no group). */
  holdsAnywhere(caps: readonly number[]): boolean {
    return this.grants === "all" || this.grants.some((g) => this.can(caps, g.at));
  }

  /** The subtrees in which the caller holds all of `caps`. */
  visibility(caps: readonly number[]): Visibility {
    if (this.grants === "all") return "all";
    if (this.grants.some((g) => g.at === EVERYWHERE && caps.every((c) => g.capabilities.has(c)))) return "all";
    const roots = [...new Set(this.grants.map((g) => g.at))]
      .filter((at) => at !== EVERYWHERE && this.can(caps, at))
      .sort();
    // Drop subtrees already inside another one.
    return roots.filter((r, i) => !roots.slice(0, i).some((o) => isAncestorOrSelf(o, r)));
  }

  /**
   * Allows the call or throws: NOT_FOUND when the caller cannot see `uid` at all (an answer must
   * not reveal that something exists in a tree the caller has no binding in), PERMISSION_DENIED
   * when it can see it but lacks a capability.
   */
  require(caps: readonly number[], uid: string, resourceType: string): void {
    if (this.can(caps, uid)) return;
    if (!this.canSee(uid)) throw notFound(resourceType, uid);
    const held = this.capabilitiesAt(uid);
    throw permissionDenied(`missing ${capabilityNames(caps.filter((c) => !held.has(c)))} on ${uid}`);
  }
}
