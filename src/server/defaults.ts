// The server's defaults, apart from the server itself (the CLI shows them in --help without
// loading the server).
import type { ServerConfig } from "./start.js";

export const DEFAULT_CONFIG: ServerConfig = {
  port: 8080,
  host: "127.0.0.1",
  dataDir: "./data",
  errorDomain: "bulwark.dev",
};
