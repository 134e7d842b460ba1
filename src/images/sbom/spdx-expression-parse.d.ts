// The one function of spdx-expression-parse (4.0.0) the SBOM writers use: it throws on a string
// that is not a valid SPDX license expression of listed license and exception ids.
declare module "spdx-expression-parse" {
  export default function parse(expression: string): unknown;
}
