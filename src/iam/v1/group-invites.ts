// v1 GroupInvites onto the v2beta1 service. (Being written: every method answers UNIMPLEMENTED until then.)
import { GroupInvites } from "../../gen/platform/iam/v1/group_invites.platform_pb.js";
import { bindService, type ServiceBinding } from "../../core/service.js";

export function v1GroupInvitesService(_beta: readonly ServiceBinding[]): ServiceBinding {
  return bindService(GroupInvites, {});
}
