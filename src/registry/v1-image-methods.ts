// The v1 Registry's image methods (GetSbom, GetVulnReport, GetImageConfig, ...) are answered by
// the images module, which starts after the registry and which the registry must not import. The
// registry owns the one v1 Registry binding; the images module fills these methods into it
// through the registry's export `serveV1Registry`, during its own start (before the server
// builds its routes from the bindings). The v1 rules (`chainguard.annotations.iam` on each
// method) authorize these calls as they do every other v1 call.
import type { ServiceBinding, ServiceHandlers } from "../core/service.js";
import type { Registry } from "../gen/platform/registry/v1/registry.platform_pb.js";

/** The v1 Registry methods another module may answer: the ones about an image's contents. */
export const V1_IMAGE_METHODS = [
  "getSbom",
  "getRawSbom",
  "getImageConfig",
  "getArchs",
  "getSize",
  "getVulnReport",
  "listManifestMetadata",
] as const;

export type V1ImageMethod = (typeof V1_IMAGE_METHODS)[number];

/** Handlers for some of the image methods, typed by the v1 Registry proto. */
export type V1ImageMethodHandlers = Pick<ServiceHandlers<typeof Registry>, V1ImageMethod>;

/**
 * Fills image-method handlers into the v1 Registry `binding`. Each method may be served once:
 * serving one twice, or a method that is not an image method (the registry's own), is a
 * programming error and fails the server's start.
 */
export function v1ImageMethodServer(binding: ServiceBinding): (handlers: V1ImageMethodHandlers) => void {
  return (handlers) => {
    for (const [name, handler] of Object.entries(handlers)) {
      if (handler === undefined) continue;
      if (!(V1_IMAGE_METHODS as readonly string[]).includes(name))
        throw new Error(`Registry.${name} is not an image method of the v1 Registry`);
      if (binding.handlers[name]) throw new Error(`Registry.${name} is already served`);
      binding.handlers[name] = handler as ServiceBinding["handlers"][string];
    }
  };
}
