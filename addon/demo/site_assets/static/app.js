// Demo Shop page scripts: the wish-list button and the cart totals are JSON API
// calls made with fetch(), like a real storefront's widgets.
"use strict";

function showMessage(text, isError) {
  const box = document.querySelector(".messages");
  const item = document.createElement("div");
  item.className = "message" + (isError ? " error" : "");
  item.textContent = text;
  box.appendChild(item);
}

async function addToWishlist(button) {
  const productId = Number(button.dataset.productId);
  const response = await fetch("/rest/V1/wishlist/items", {
    method: "POST",
    headers: { "Content-Type": "application/json", "Accept": "application/json" },
    body: JSON.stringify({ product_id: productId, qty: 1 }),
  });
  const data = await response.json();
  if (!response.ok) {
    showMessage(data.message || "Could not add to the wish list.", true);
    return;
  }
  showMessage(data.message);
  document.querySelector("#wishlist-count").textContent = String(data.items_count);
}

async function loadCartTotals() {
  const target = document.querySelector("#cart-totals");
  // The `_` parameter defeats caches, as storefront widgets commonly do.
  const response = await fetch("/rest/V1/carts/mine/totals?_=" + Date.now(), {
    headers: { "Accept": "application/json" },
  });
  const totals = await response.json();
  target.textContent = `${totals.items_qty} item(s), grand total $${totals.grand_total.toFixed(2)}`;
  target.dataset.loaded = "true";
}

document.addEventListener("DOMContentLoaded", () => {
  const button = document.querySelector("#add-to-wishlist");
  if (button) {
    button.addEventListener("click", () => {
      button.disabled = true;
      addToWishlist(button).finally(() => { button.disabled = false; });
    });
  }
  if (document.querySelector("#cart-totals")) {
    loadCartTotals();
  }
});
