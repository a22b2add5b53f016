// Buttons that change the cluster: each asks for confirmation in a modal <dialog> (keyboard
// reachable, Esc cancels), POSTs through the JSON API, then shows the server's sentence in a toast
// or its error message in the dialog, and asks the page for a fresh read.

import {postJSON} from './api.js';
import {h} from './dom.js';

let afterAction = () => {};

/** Called by main.js: what to do after any action succeeded (refresh the page's data). */
export function onActionDone(callback) { afterAction = callback; }

function toast(message) {
  const el = document.getElementById('toast');
  el.textContent = message;
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 6000);
}

/**
 * Ask, then act. `spec`: {title, text, confirm (button label), danger (bool), path, number:
 * {label, name, value} (an optional whole-number field sent in the body)}. Resolves true if done.
 */
export function confirmAndPost(spec) {
  const dialog = document.getElementById('confirm');
  const ok = document.getElementById('confirm-ok');
  const field = document.getElementById('confirm-field');
  const input = document.getElementById('confirm-number');
  const error = document.getElementById('confirm-error');
  document.getElementById('confirm-title').textContent = spec.title;
  document.getElementById('confirm-text').textContent = spec.text;
  ok.textContent = spec.confirm;
  ok.className = `button primary${spec.danger ? ' danger' : ''}`;
  error.hidden = true;
  field.hidden = !spec.number;
  if (spec.number) {
    field.querySelector('label').textContent = spec.number.label;
    input.value = String(spec.number.value);
  }
  return new Promise((resolve) => {
    const onSubmit = async (event) => {
      if (event.submitter && event.submitter.value !== 'ok') return;  // Cancel closes the dialog
      event.preventDefault();
      const body = spec.number ? {[spec.number.name]: Number.parseInt(input.value || '0', 10)} : {};
      ok.disabled = true;
      try {
        const result = await postJSON(spec.path, body);
        dialog.close('done');
        toast(result.message || 'Done');
        afterAction();
      } catch (err) {
        error.textContent = `${err.message} (${err.kind})`;
        error.hidden = false;
      } finally {
        ok.disabled = false;
      }
    };
    const form = dialog.querySelector('form');
    form.addEventListener('submit', onSubmit);
    dialog.addEventListener('close', () => {
      form.removeEventListener('submit', onSubmit);
      resolve(dialog.returnValue === 'done');
    }, {once: true});
    dialog.returnValue = '';
    dialog.showModal();
    (spec.danger ? dialog.querySelector('button[value="cancel"]') : ok).focus();
  });
}

/** A button that runs `confirmAndPost(spec)`; `key` keeps keyboard focus across refreshes. */
export function actionButton(label, spec, {danger = false, key = '', small = false} = {}) {
  return h('button', {
    type: 'button', class: `button${danger ? ' danger' : ''}${small ? ' small' : ''}`,
    'data-key': key || `${label}:${spec.path}`, 'data-action': spec.path,
    onclick: () => confirmAndPost({danger, ...spec}),
  }, label);
}
