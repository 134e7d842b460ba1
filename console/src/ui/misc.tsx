// Small pieces every page uses: the page frame, copying a value, confirming a destructive action,
// times and sizes in words.
import { useEffect, useRef, useState, type ReactNode } from "react";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { Button } from "./forms";

/** A page: its title (also the document's), optional actions beside it, its content. */
export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  useEffect(() => {
    document.title = `${title} · Bulwark`;
  }, [title]);
  return (
    <>
      <header className="page-header">
        <h1 tabIndex={-1} id="page-title">
          {title}
        </h1>
        {actions && <div className="page-actions">{actions}</div>}
      </header>
      {children}
    </>
  );
}

/** A titled section of a page. */
export function Section({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  return (
    <section className="section" aria-label={title}>
      <div className="section-header">
        <h2>{title}</h2>
        {actions}
      </div>
      {children}
    </section>
  );
}

/** Copies `text` to the clipboard; says so (live region) or shows the text selected to copy by hand. */
export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [copied, setCopied] = useState<"yes" | "no" | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied("yes");
    } catch {
      setCopied("no");
    }
  };
  return (
    <span className="copy">
      <Button onClick={copy}>{label}</Button>
      <span role="status" className="muted">
        {copied === "yes" ? "Copied" : copied === "no" ? "Select the text and copy it" : ""}
      </span>
    </span>
  );
}

/** A value to copy: shown in a code box with a copy button. */
export function CopyValue({ value, label }: { value: string; label: string }) {
  return (
    <div className="copy-value">
      <code aria-label={label}>{value}</code>
      <CopyButton text={value} label={`Copy ${label.toLowerCase()}`} />
    </div>
  );
}

/**
 * A destructive action behind a confirmation (a native modal dialog: focus moves into it, Escape
 * cancels). `onConfirm` runs the action; its error is shown by the caller.
 */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  busy,
}: {
  label: string;
  question: ReactNode;
  confirmLabel?: string;
  onConfirm: () => void | Promise<unknown>;
  busy?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  return (
    <>
      <Button kind="danger" busy={busy} onClick={() => dialog.current?.showModal()}>
        {label}
      </Button>
      <dialog ref={dialog} className="dialog" aria-label={label}>
        <p>{question}</p>
        <div className="dialog-actions">
          <Button onClick={() => dialog.current?.close()}>Cancel</Button>
          <Button
            kind="danger"
            onClick={() => {
              dialog.current?.close();
              void onConfirm();
            }}
          >
            {confirmLabel ?? label}
          </Button>
        </div>
      </dialog>
    </>
  );
}

export function formatTime(value: Timestamp | Date | undefined): string {
  if (!value) return "—";
  const date = value instanceof Date ? value : timestampDate(value);
  return date
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");
}

/** A <time> element with the ISO value for machines and a readable one for people. */
export function Time({ value }: { value: Timestamp | Date | undefined }) {
  if (!value) return <span>—</span>;
  const date = value instanceof Date ? value : timestampDate(value);
  return <time dateTime={date.toISOString()}>{formatTime(date)}</time>;
}

export function formatBytes(bytes: number | bigint): string {
  let n = Number(bytes);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit++;
  }
  return `${unit === 0 ? n : n.toFixed(1)} ${units[unit]}`;
}

/** A severity as a labelled badge (text, not colour alone). */
export function SeverityBadge({ severity }: { severity: string }) {
  const level = severity.toLowerCase();
  return <span className={`badge badge-${level}`}>{severity || "unknown"}</span>;
}
