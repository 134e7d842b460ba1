// The GA packages (chainguard.platform.*.v2) are the v2beta1 packages under another name: the
// same services, methods, messages and field numbers, with `/v2/` in the HTTP paths (their protos
// are derived by scripts/derive-v2-protos.mjs). A module serves both from one implementation: the
// v2 service is bound to the v2beta1 handlers, each request and answer crossing over by its wire
// bytes (identical by construction, and exact for every field, unknown ones included).
import {
  create,
  fromBinary,
  toBinary,
  type DescFile,
  type DescMethodUnary,
  type DescService,
} from "@bufbuild/protobuf";
import type { ListableResource } from "../core/list.js";
import type { ServiceBinding, UnaryHandler } from "../core/service.js";

const BETA = ".v2beta1.";
const GA = ".v2.";

/** The GA name of a v2beta1 name ("chainguard.platform.iam.v2beta1.Group" → "...iam.v2.Group"). */
export function gaNameOf(betaTypeName: string): string {
  if (!betaTypeName.includes(BETA)) throw new Error(`${betaTypeName} is not in a v2beta1 package`);
  return betaTypeName.replace(BETA, GA);
}

export class GaTwins {
  /** v2beta1 service type name → its GA twin */
  private readonly twins = new Map<string, DescService>();

  /**
   * @param beta the v2beta1 services a module serves
   * @param gaFiles the generated GA files that declare their twins
   */
  constructor(beta: readonly DescService[], gaFiles: readonly DescFile[]) {
    const ga = new Map(gaFiles.flatMap((f) => f.services).map((s) => [s.typeName, s]));
    for (const service of beta) {
      const twin = ga.get(gaNameOf(service.typeName));
      if (!twin) throw new Error(`no GA twin of ${service.typeName} among the given files`);
      for (const method of service.methods) {
        const other = twin.methods.find((m) => m.name === method.name);
        if (!other || other.methodKind !== method.methodKind)
          throw new Error(`${twin.typeName} has no ${method.methodKind} method ${method.name}`);
      }
      this.twins.set(service.typeName, twin);
    }
  }

  /** the GA twins of the v2beta1 services, in the same order */
  get services(): DescService[] {
    return [...this.twins.values()];
  }

  /** the listings, plus the same listing under each item's GA name */
  listings(beta: Readonly<Record<string, ListableResource>>): Record<string, ListableResource> {
    const out: Record<string, ListableResource> = { ...beta };
    for (const [name, listing] of Object.entries(beta)) out[gaNameOf(name)] = listing;
    return out;
  }

  /** the bindings, plus a binding of each v2beta1 binding's GA twin to the same handlers */
  bind(bindings: readonly ServiceBinding[]): ServiceBinding[] {
    const out = [...bindings];
    for (const binding of bindings) {
      const twin = this.twins.get(binding.service.typeName);
      if (twin) out.push(twinBinding(twin, binding));
    }
    return out;
  }
}

function twinBinding(twin: DescService, of: ServiceBinding): ServiceBinding {
  const handlers: ServiceBinding["handlers"] = {};
  for (const method of twin.methods) {
    if (method.methodKind !== "unary") continue;
    const source = of.service.methods.find((m) => m.name === method.name) as DescMethodUnary;
    const handler = of.handlers[source.localName];
    // A method the v2beta1 service leaves unimplemented is unimplemented on its twin too.
    if (handler) handlers[method.localName] = crossOver(method as DescMethodUnary, source, handler);
  }
  return { service: twin, handlers };
}

function crossOver(ga: DescMethodUnary, beta: DescMethodUnary, handler: UnaryHandler<DescMethodUnary>) {
  return async (
    request: Parameters<UnaryHandler<DescMethodUnary>>[0],
    call: Parameters<UnaryHandler<DescMethodUnary>>[1],
  ) => {
    const betaRequest = fromBinary(beta.input, toBinary(ga.input, request));
    const betaAnswer = create(beta.output, await handler(betaRequest, call));
    return fromBinary(ga.output, toBinary(beta.output, betaAnswer));
  };
}
