// v1 GroupAccountAssociations onto the v2beta1 service. (Being written: every method answers UNIMPLEMENTED until then.)
import { GroupAccountAssociations } from "../../gen/platform/iam/v1/account_associations.platform_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";

export function v1AccountAssociationsService(_beta: readonly ServiceBinding[]): ServiceBinding {
  return bindService(GroupAccountAssociations, {});
}
