-- Leaves and what they commit to, for every party of vt.game: the leaf schedule of a run,
-- the Merkle tree over a list of claimed leaves, the log digest of disclosed steps, and the
-- check of a leaf answer against a committed root.
local M = {}

-- A leaf of the initial state commits to no logs: its log digest is all zeros.
M.ZERO = string.rep("0", 64)

-- Steps of leaf `i` of a run with n steps and checkpoints every k: (first, last), or nil for leaf 0.
function M.interval(i, k, n)
  if i == 0 then return nil end
  return (i - 1) * k + 1, math.min(i * k, n)
end

-- Leaves of a run with n steps and checkpoints every k (leaf 0 is the initial state).
function M.leaf_count(k, n)
  if n == 0 then return 1 end
  return math.ceil(n / k) + 1
end

-- RFC 6962 roots and inclusion proofs over a list of hex leaves (the first `size`, default
-- all), for a party that claims leaves its store does not hold (an auditor's claimed
-- leaves, a lying one's included). vt.merkle computes them: this only feeds it the list.
local function tree_of(leaves, size)
  local tree = vt.merkle.tree()
  for i = 1, size or #leaves do tree:append(leaves[i]) end
  return tree
end

M.merkle = {
  root = function(leaves, size) return tree_of(leaves, size):root() end,
  prove = function(leaves, i, size) return tree_of(leaves, size):prove(i) end,
}

-- The log digest of a leaf's steps ({ {step=, records=}, ... }), as the store computes it.
function M.log_digest_of(steps)
  local digests = {}
  for i, s in ipairs(steps) do digests[i] = vt.store.step_digest(s.step, s.records) end
  return vt.store.log_digest(digests)
end

local is_hex = require("vt.game.wire").is_hex

-- Checks a leaf answer {index, leaf, state_digest, log_digest, proof}: it is leaf `index`
-- (when given), the leaf hashes from its digests, leaf 0 commits to no logs, and its proof
-- leads to `root` in a tree of n_leaves. Returns true, or false and why (the auditor, the
-- judge and the client all check the trainer's answers so). Never raises: whatever a party
-- answers, the checker gets a reason, not an error of its own.
function M.verify_leaf(m, spec_hash, n_leaves, root, index)
  if type(m) ~= "table" or type(m.leaf) ~= "string" then return false, "no leaf in the answer" end
  if type(m.index) ~= "number" then return false, "the leaf answer has no index" end
  if index ~= nil and m.index ~= index then
    return false, string.format("asked for leaf %d, answered with leaf %s", index, tostring(m.index))
  end
  if not (is_hex(m.state_digest) and is_hex(m.log_digest)) then
    return false, "leaf " .. m.index .. " comes without its state and log digests"
  end
  if m.index == 0 and m.log_digest ~= M.ZERO then
    return false, "leaf 0 (the initial state) commits to logs: its log digest is not all zeros"
  end
  local ok, recomputed = pcall(vt.store.leaf, spec_hash, m.index, m.state_digest, m.log_digest)
  if not ok or recomputed ~= m.leaf then return false, "leaf " .. m.index .. " does not hash from its state and log digests" end
  local okp, inside = pcall(vt.merkle.verify, m.leaf, m.index, n_leaves, m.proof, root)
  if not (okp and inside) then
    return false, "the inclusion proof of leaf " .. m.index .. " does not lead to the committed root"
  end
  return true
end

-- A commitment as every checker needs it: {spec_hash, n_leaves, root, k, n}.

-- Checks a bisection answer for leaf `index`: the leaf (verify_leaf) and the root of the
-- first index + 1 leaves, with its consistency proof to the committed root.
function M.check_leaf_answer(answer, c, index)
  local ok, why = M.verify_leaf(answer, c.spec_hash, c.n_leaves, c.root, index)
  if not ok then return false, why end
  if not is_hex(answer.prefix_root) or type(answer.consistency) ~= "table" then
    return false, "the answer for leaf " .. index .. " has no prefix root and consistency proof"
  end
  local okc, consistent = pcall(vt.merkle.verify_consistency, answer.prefix_root, index + 1, c.n_leaves,
                                answer.consistency, c.root)
  if not (okc and consistent) then
    return false, "the prefix root of " .. (index + 1) .. " leaves is not consistent with the committed root"
  end
  return true
end

-- Checks disclosed steps for leaf `leaf` ({ {step=, records=}, ... }): exactly the steps of
-- its interval, in order (none for leaf 0), whose records hash to `log_digest`.
function M.check_steps(steps, leaf, c, log_digest)
  local first, last = M.interval(leaf, c.k, c.n)
  local want = first and (last - first + 1) or 0
  if type(steps) ~= "table" or #steps ~= want then
    return false, string.format("leaf %d covers %d steps%s; the answer holds %s", leaf, want,
                                first and string.format(" (%d..%d)", first, last) or "",
                                type(steps) == "table" and tostring(#steps) or "none")
  end
  for i, s in ipairs(steps) do
    if s.step ~= first + i - 1 then
      return false, string.format("step %d of leaf %d is numbered %s", first + i - 1, leaf, tostring(s.step))
    end
  end
  local ok, digest = pcall(M.log_digest_of, steps)
  if not ok then return false, "the records of leaf " .. leaf .. " do not form a log: " .. tostring(digest) end
  if digest ~= log_digest then
    return false, "the disclosed logs of leaf " .. leaf .. " do not match the log digest committed in the leaf"
  end
  return true
end

-- Checks a `logs` answer for leaf `leaf`: the leaf, then its steps.
function M.check_logs_answer(answer, c, leaf)
  if type(answer) ~= "table" then return false, "the answer is not an object" end
  local ok, why = M.verify_leaf(answer.leaf, c.spec_hash, c.n_leaves, c.root, leaf)
  if not ok then return false, why end
  return M.check_steps(answer.steps, leaf, c, answer.leaf.log_digest)
end

-- The commitment `c` of a spec text and a claimed root: {spec_hash, n_leaves, root, k, n},
-- or nil and why the claim does not fit the spec.
function M.of_spec(spec_text, root, n_leaves)
  local ok, spec = pcall(vt.spec.parse, spec_text)
  if not ok then return nil, "the spec does not parse: " .. tostring(spec) end
  local k, n = tonumber(spec:get("checkpoint_every")), tonumber(spec:get("steps"))
  if n_leaves ~= M.leaf_count(k, n) then
    return nil, string.format("the commitment has %s leaves; the spec implies %d", tostring(n_leaves), M.leaf_count(k, n))
  end
  return {spec_hash = vt.store.sha256(spec_text), n_leaves = n_leaves, root = root, k = k, n = n, spec = spec}
end

return M
