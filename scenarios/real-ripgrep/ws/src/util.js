// Helpers for formatting numbers.
function formatTotal(total) {
  return `Total: ${total}`;
}

module.exports = { formatTotal };
