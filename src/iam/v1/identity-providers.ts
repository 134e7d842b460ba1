// v1 IdentityProviders onto the v2beta1 service. (Being written: every method answers UNIMPLEMENTED until then.)
import { IdentityProviders } from "../../gen/platform/iam/v1/identity_providers.platform_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";

export function v1IdentityProvidersService(_beta: readonly ServiceBinding[]): ServiceBinding {
  return bindService(IdentityProviders, {});
}
