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

-- Checks a leaf answer {index, leaf, state_digest, log_digest, proof}: the leaf hashes from
-- its digests and its proof leads to `root` in a tree of n_leaves. Returns true, or false
-- and why (the auditor, the judge and the client all check the trainer's answers so).
function M.verify_leaf(m, spec_hash, n_leaves, root)
  if type(m) ~= "table" or type(m.leaf) ~= "string" then return false, "no leaf in the answer" end
  local recomputed = vt.store.leaf(spec_hash, m.index, m.state_digest, m.log_digest)
  if recomputed ~= m.leaf then return false, "leaf " .. m.index .. " does not hash from its state and log digests" end
  if not vt.merkle.verify(m.leaf, m.index, n_leaves, m.proof, root) then
    return false, "the inclusion proof of leaf " .. m.index .. " does not lead to the committed root"
  end
  return true
end

return M
