// Who is signed in, and what the page knows of them: the session (user,
// token, profile), the feeds they follow and the users they mute. The one
// owner of this state; others read and change it through these functions.

const SESSION_KEY = "tidings.session";

let current = null;
let following = new Set();
let muted = new Set();

// The session the tab kept (sessionStorage), if it is well formed.
export function restoreSession() {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION_KEY) || "null");
    current = value && typeof value.token === "string" && typeof value.user === "string" ? value : null;
  } catch {
    current = null;
  }
  return current;
}

export function startSession({ user, token }) {
  current = { user, token };
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(current));
}

export function endSession() {
  current = null;
  following = new Set();
  muted = new Set();
  sessionStorage.removeItem(SESSION_KEY);
}

export const signedIn = () => current !== null;
export const me = () => current.user;
export const token = () => current.token;
// The signed-in user as cards show them (their profile, once looked up).
export const myProfile = () => current.profile;

export function setMyProfile(profile) {
  current.profile = profile;
}

export function setRelations(sources, mutedIds) {
  following = new Set(sources);
  muted = new Set(mutedIds);
}

export const isFollowing = (source) => following.has(source);
export const isMuted = (userId) => muted.has(userId);

export function setFollowing(source, on) {
  if (on) following.add(source);
  else following.delete(source);
}

export function setMuted(userId, on) {
  if (on) muted.add(userId);
  else muted.delete(userId);
}
