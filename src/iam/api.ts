// The IAM module's public face: the only file of iam that code outside it (other features,
// server/, cli/) imports (test/architecture.test.ts). What the running module offers other
// modules is its `exports` (IamExports, through `ctx.exportsOf(iamModule)`), typed here.
export { iamModule } from "./module.js";
export type {
  GroupDirectory,
  GroupRef,
  IamExports,
  IdentityDirectory,
  InviteRedemption,
  RoleBindingDirectory,
  SignInIdentityProviders,
} from "./exports.js";
export { InviteRefused, type VouchedEmails } from "./invites.js";
