// The registry area of the console: its pages and navigation entries.
import type { Area } from "../types";

export const registryArea: Area = { routes: [], nav: [] };
