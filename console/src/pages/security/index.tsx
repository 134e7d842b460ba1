// The security area of the console: its pages and navigation entries.
import type { Area } from "../types";

export const securityArea: Area = { routes: [], nav: [] };
