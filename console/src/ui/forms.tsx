// Form controls with their labels tied to them (for/id), hints tied by aria-describedby, and
// native validation attributes; buttons that say when they are busy.
import {
  useId,
  type ButtonHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  type InputHTMLAttributes,
} from "react";

interface FieldProps {
  label: string;
  hint?: ReactNode;
}

export function TextField({
  label,
  hint,
  onValue,
  ...input
}: FieldProps & InputHTMLAttributes<HTMLInputElement> & { onValue?: (value: string) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input
        id={id}
        aria-describedby={hint ? `${id}-hint` : undefined}
        onChange={(e) => onValue?.(e.target.value)}
        {...input}
      />
      {hint && (
        <small id={`${id}-hint`} className="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

export function TextArea({
  label,
  hint,
  value,
  onValue,
  rows = 4,
  required,
  secret,
}: FieldProps & {
  value: string;
  onValue: (value: string) => void;
  rows?: number;
  required?: boolean;
  /** a credential: no spell checking (which some browsers send away), no autocompletion */
  secret?: boolean;
}) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea
        id={id}
        rows={rows}
        value={value}
        required={required}
        aria-describedby={hint ? `${id}-hint` : undefined}
        onChange={(e) => onValue(e.target.value)}
        {...(secret ? { spellCheck: false, autoComplete: "off", autoCapitalize: "off", autoCorrect: "off" } : {})}
      />
      {hint && (
        <small id={`${id}-hint`} className="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

export interface Option {
  value: string;
  label: string;
}

export function SelectField({
  label,
  hint,
  options,
  onValue,
  ...select
}: FieldProps & SelectHTMLAttributes<HTMLSelectElement> & { options: Option[]; onValue?: (value: string) => void }) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select
        id={id}
        aria-describedby={hint ? `${id}-hint` : undefined}
        onChange={(e) => onValue?.(e.target.value)}
        {...select}
      >
        {options.map((o) => (
          <option key={o.value} value={o.value}>
            {o.label}
          </option>
        ))}
      </select>
      {hint && (
        <small id={`${id}-hint`} className="hint">
          {hint}
        </small>
      )}
    </div>
  );
}

export function CheckField({
  label,
  checked,
  onValue,
}: {
  label: string;
  checked: boolean;
  onValue: (checked: boolean) => void;
}) {
  const id = useId();
  return (
    <div className="field field-check">
      <input id={id} type="checkbox" checked={checked} onChange={(e) => onValue(e.target.checked)} />
      <label htmlFor={id}>{label}</label>
    </div>
  );
}

export function Button({
  busy,
  kind = "secondary",
  children,
  ...button
}: ButtonHTMLAttributes<HTMLButtonElement> & { busy?: boolean; kind?: "primary" | "secondary" | "danger" }) {
  return (
    <button
      type="button"
      className={`button button-${kind}`}
      aria-busy={busy || undefined}
      {...button}
      disabled={busy || button.disabled}
    >
      {children}
    </button>
  );
}

/** A form whose submit is handled here (no page load); children are its fields and buttons. */
export function Form({
  label,
  onSubmit,
  children,
}: {
  label: string;
  onSubmit: () => void | Promise<unknown>;
  children: ReactNode;
}) {
  return (
    <form
      className="form"
      aria-label={label}
      onSubmit={(e) => {
        e.preventDefault();
        void onSubmit();
      }}
    >
      {children}
    </form>
  );
}
