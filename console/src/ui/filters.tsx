// Filter controls whose values live in the URL's query: a text field of several values
// (comma-separated), a set of checkboxes (a repeated enum), and a date-time in UTC. Each writes its
// query key and starts the list again at its first page.
import { useId } from "react";
import { useQueryState } from "../router";
import { resetPosition } from "./list";
import { TextField } from "./forms";

/** "a, b ,c" → ["a", "b", "c"] (empty entries dropped). */
export function splitList(text: string | null | undefined): string[] {
  return (text ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A text filter bound to query key `name`. */
export function QueryText({
  name,
  label,
  hint,
  type = "text",
}: {
  name: string;
  label: string;
  hint?: string;
  type?: "text" | "search";
}) {
  const [query, setQuery] = useQueryState();
  return (
    <TextField
      label={label}
      hint={hint}
      type={type}
      value={query.get(name) ?? ""}
      onValue={(v) => setQuery({ [name]: v, ...resetPosition })}
    />
  );
}

/** A UTC date and time filter (an `<input type=datetime-local>` read as UTC) bound to query key `name`. */
export function QueryDateTime({ name, label }: { name: string; label: string }) {
  const [query, setQuery] = useQueryState();
  return (
    <TextField
      label={label}
      type="datetime-local"
      step={1}
      value={query.get(name) ?? ""}
      onValue={(v) => setQuery({ [name]: v, ...resetPosition })}
    />
  );
}

/** The Date of a `datetime-local` value taken as UTC; undefined when empty or not a date. */
export function utcDate(value: string | null): Date | undefined {
  if (!value) return undefined;
  const date = new Date(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** Checkboxes for a repeated enum filter: the checked values, comma-separated, in query key `name`. */
export function QueryChecks({
  name,
  legend,
  options,
}: {
  name: string;
  legend: string;
  options: { value: string; label: string }[];
}) {
  const [query, setQuery] = useQueryState();
  const id = useId();
  const checked = new Set(splitList(query.get(name)));
  const toggle = (value: string, on: boolean) => {
    const next = options.map((o) => o.value).filter((v) => (v === value ? on : checked.has(v)));
    setQuery({ [name]: next.join(","), ...resetPosition });
  };
  return (
    <fieldset className="field checks">
      <legend>{legend}</legend>
      {options.map((o) => (
        <div className="field-check" key={o.value}>
          <input
            id={`${id}-${o.value}`}
            type="checkbox"
            checked={checked.has(o.value)}
            onChange={(e) => toggle(o.value, e.target.checked)}
          />
          <label htmlFor={`${id}-${o.value}`}>{o.label}</label>
        </div>
      ))}
    </fieldset>
  );
}
