// The iam area of the console: its pages and navigation entries.
import type { Area } from "../types";

export const iamArea: Area = { routes: [], nav: [] };
