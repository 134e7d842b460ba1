// v1 Registry (package chainguard.platform.registry) onto the v2beta1 ReposService and
// TagsService. (Being written: every method answers UNIMPLEMENTED until then.)
import { Registry } from "../gen/platform/registry/v1/registry.platform_pb.js";
import { bindService, type ServiceBinding } from "../core/service.js";

export function v1RegistryService(_beta: readonly ServiceBinding[]): ServiceBinding {
  return bindService(Registry, {});
}
